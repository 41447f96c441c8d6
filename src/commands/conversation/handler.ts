import {
  type AppendResult,
  DuplicateEventIdError,
  type EventStore,
  type EventToAppend,
  type ExpectedRevision,
  type Position,
  START,
  type StreamAppend,
  WrongExpectedRevisionError,
} from '../../ports/event-store';
import type { Pool } from 'pg';
import { DomainError } from '../decider';
import { InvalidEventError } from '../../events/registry';
import { baseMetadata, type CommandContext } from '../handle';
import type { ConversationEvent } from '../../events/conversations';
import { conversationsProjection } from '../../projections/conversations/projection';
import { type CompanyDirectory, findRecordedConversations, loadCompanyDirectories, messageKey } from '../../projections/conversations/queries';
import { type ProjectionDriver, ReadModelTimeoutError } from '../../ports/read-models';
import { readCheckpoint } from '../../projections/store';
import {
  conversationDecider as decider,
  conversationEventId,
  conversationStreamId,
  type ConversationState,
  type MessageToRecord,
  occurrenceOf,
} from './decider';

export type RecordOutcome =
  /** the message was recorded now (MessageRecorded, plus MessageDeleted when it arrived deleted) */
  | { status: 'recorded' }
  /** an already recorded message is deleted now (MessageDeleted) */
  | { status: 'deleted' }
  /** a deleted message is not deleted any more (MessageRestored) */
  | { status: 'restored' }
  /** nothing to record: the id is already recorded (and its deletion state does not change) */
  | { status: 'unchanged' }
  | { status: 'rejected'; code: string; reason: string };

export interface RecordResult {
  outcomes: RecordOutcome[];
  /** position of the last appended event (undefined when nothing was appended) */
  position: Position | undefined;
}

export interface RecorderDeps {
  store: EventStore;
  pool: Pool;
  runner: ProjectionDriver;
  now: () => Date;
}

export interface RecorderOptions {
  /** streams whose folded state is kept between calls (default 1000) */
  maxCachedStreams?: number;
  /** retries of a stream after a concurrent append (default 10) */
  maxConflictRetries?: number;
  /** message ids this recorder recorded, remembered with their conversation (default 20,000: about 3 MB) */
  maxRememberedIds?: number;
}

const PATIENT_REFRESH_MS = 1000;
/** a cached stream with more events than this is read from its next revision rather than again from its start */
const REREAD_LIMIT = 100n;
const PATIENT_REFRESH_EVERY_MS = 5000;

interface StreamEntry {
  state: ConversationState;
  /** the next revision to read (= number of events folded into `state`) */
  nextRevision: bigint;
}

/** One batch being recorded: its messages, what they are checked against, and their outcomes so far. */
interface RecordingBatch {
  messages: readonly MessageToRecord[];
  directories: Map<number, CompanyDirectory>;
  /** conversations the messages' ids were recorded in before this batch (read model) */
  elsewhere: Map<string, string>;
  outcomes: RecordOutcome[];
  ctx: Omit<CommandContext, 'companyId' | 'eventIdFor'>;
}

/**
 * The command handler of chat messages (`RecordMessage` on `conversation-{companyId}-{conversationId}`),
 * batched: the Kafka consumer records one message per call, `import-messages` many. Per stream it folds the
 * stream once (and keeps the folded state, reading only newer events on the next call), decides every message
 * of the batch in order, and appends their events in one append with the expected revision; a concurrent
 * append makes it reload and decide again. Where appendMany is all or nothing (Postgres) the streams of a batch are
 * read in one query and appended in one appendMany. Event ids are deterministic (company, conversation, message id, type), so a redelivered record
 * is never duplicated.
 *
 * It validates against the company's directory (companies, agents, operators of the `conversations` read
 * model); when a message names something the read model does not know yet, the read model is caught up to the
 * head of the log once before the message is rejected, so provisioning that just happened is seen.
 */
export class ConversationRecorder {
  private readonly cache = new Map<string, StreamEntry>();
  private readonly maxCached: number;
  private readonly maxRetries: number;
  private readonly maxRemembered: number;
  /**
   * (company, message id) -> conversation, of the messages this recorder recorded or found recorded lately: the
   * read model the other-conversation check reads lags behind (and is not applied at all while the CLI imports).
   */
  private readonly remembered = new Map<string, string>();
  private lastPatientRefresh = 0;

  constructor(
    private readonly deps: RecorderDeps,
    options: RecorderOptions = {},
  ) {
    this.maxCached = options.maxCachedStreams ?? 1000;
    this.maxRetries = options.maxConflictRetries ?? 10;
    this.maxRemembered = options.maxRememberedIds ?? 20_000;
  }

  async record(messages: readonly MessageToRecord[], ctx: Omit<CommandContext, 'companyId' | 'eventIdFor'>): Promise<RecordResult> {
    const outcomes: RecordOutcome[] = new Array(messages.length);
    if (messages.length === 0) return { outcomes, position: undefined };

    const companyIds = [...new Set(messages.map((m) => m.companyId))];
    let directories = await loadCompanyDirectories(this.deps.pool, companyIds);
    if (messages.some((m) => namesUnknown(m, directories.get(m.companyId)!))) directories = await this.refreshDirectories(messages, companyIds);
    const elsewhere = await findRecordedConversations(this.deps.pool, messages);

    const batch: RecordingBatch = { messages, directories, elsewhere, outcomes, ctx };
    let position: Position | undefined;
    for (const run of runsInLineOrder(messages)) {
      const streams = groupByStream(messages, run);
      if (streams.size > 1 && this.deps.store.appendManyIsAtomic) {
        position = this.later(position, await this.recordStreamsTogether(streams, batch));
        continue;
      }
      for (const [streamId, indexes] of streams) position = this.later(position, await this.recordStream(streamId, indexes, batch));
    }
    return { outcomes, position };
  }

  /**
   * Catches the read model up and reloads the directories. The log's readable head trails commits while older
   * transactions run anywhere in the cluster, so provisioning committed a moment ago may not be readable yet:
   * before a message is rejected for naming something unknown, this keeps catching up for up to a second (at
   * most once every few seconds per recorder, so a file full of unknown names is not slowed down).
   */
  private async refreshDirectories(messages: readonly MessageToRecord[], companyIds: number[]): Promise<Map<number, CompanyDirectory>> {
    const patient = Date.now() - this.lastPatientRefresh > PATIENT_REFRESH_EVERY_MS;
    const deadline = Date.now() + (patient ? PATIENT_REFRESH_MS : 0);
    for (;;) {
      await catchUpConversations(this.deps);
      const directories = await loadCompanyDirectories(this.deps.pool, companyIds);
      if (!messages.some((m) => namesUnknown(m, directories.get(m.companyId)!)) || Date.now() >= deadline) {
        if (patient) this.lastPatientRefresh = Date.now();
        return directories;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /**
   * The streams of one run together (only where the store's appendMany is all or nothing, `appendManyIsAtomic`):
   * read in one query, decided, and appended in one appendMany. When the store refuses it (a concurrent append, an event
   * it cannot store), nothing was appended and each stream is recorded on its own, as `recordStream` does; so is
   * a stream whose events turn out stored already.
   */
  private async recordStreamsTogether(streams: Map<string, number[]>, batch: RecordingBatch): Promise<Position | undefined> {
    const { messages, outcomes } = batch;
    const entries = await this.takeMany([...streams.keys()]);
    const appends: Array<StreamAppend & { entry: StreamEntry; indexes: number[]; local: RecordOutcome[] }> = [];
    for (const [streamId, indexes] of streams) {
      const entry = entries.get(streamId)!;
      const { events, local } = this.decideStream(entry, indexes, batch);
      if (events.length > 0) {
        appends.push({ streamId, events, expected: expectedRevisionOf(entry), entry, indexes, local });
        continue;
      }
      this.put(streamId, entry);
      this.settle(indexes, local, outcomes, messages);
    }
    if (appends.length === 0) return undefined;
    let results: AppendResult[] = [];
    try {
      results = await this.deps.store.appendMany(appends.map(({ streamId, events, expected }) => ({ streamId, events, expected })));
    } catch (err) {
      if (!(err instanceof WrongExpectedRevisionError || err instanceof DuplicateEventIdError || err instanceof InvalidEventError)) throw err;
    }
    let position: Position | undefined;
    for (const [k, a] of appends.entries()) {
      const result = results[k];
      if (result === undefined || result.alreadyAppended) {
        // its entry is out of the cache: the stream is folded afresh
        position = this.later(position, await this.recordStream(a.streamId, a.indexes, batch));
        continue;
      }
      a.entry.nextRevision = result.nextRevision + 1n;
      this.put(a.streamId, a.entry);
      this.settle(a.indexes, a.local, outcomes, messages);
      position = this.later(position, result.position);
    }
    return position;
  }

  private async recordStream(streamId: string, indexes: number[], batch: RecordingBatch): Promise<Position | undefined> {
    const { messages, outcomes } = batch;
    for (let attempt = 0; ; attempt++) {
      const entry = await this.take(streamId);
      const { events, local } = this.decideStream(entry, indexes, batch);
      if (events.length === 0) {
        this.put(streamId, entry);
        this.settle(indexes, local, outcomes, messages);
        return undefined;
      }
      try {
        const result = await this.deps.store.append(streamId, events, expectedRevisionOf(entry));
        // every id already stored: the state was stale. Decided again on the stream as it is, since a later event may
        // follow those (another writer's deletion then restore: this record's deletion is a new one, not theirs).
        if (result.alreadyAppended && attempt < this.maxRetries) continue;
        entry.nextRevision = result.nextRevision + 1n;
        this.put(streamId, entry);
        const final = result.alreadyAppended ? local.map((o) => (o.status === 'rejected' ? o : ({ status: 'unchanged' } as const))) : local;
        this.settle(indexes, final, outcomes, messages);
        return result.position;
      } catch (err) {
        // the entry was taken out of the cache: the next attempt folds the stream afresh
        if (err instanceof WrongExpectedRevisionError && attempt < this.maxRetries) continue;
        if (err instanceof InvalidEventError) return this.recordOneByOne(streamId, indexes, batch, err);
        throw err;
      }
    }
  }

  /**
   * The store refused the stream's append for an event schema, before writing anything: each message is recorded
   * on its own, so the one that can never be recorded is rejected and the others around it are still recorded.
   */
  private async recordOneByOne(streamId: string, indexes: number[], batch: RecordingBatch, refusal: InvalidEventError): Promise<Position | undefined> {
    const { messages, outcomes } = batch;
    if (indexes.length === 1) {
      this.settle(indexes, [{ status: 'rejected', code: 'INVALID_EVENT', reason: refusal.message }], outcomes, messages);
      return undefined;
    }
    let position: Position | undefined;
    for (const i of indexes) {
      const p = await this.recordStream(streamId, [i], batch);
      if (p !== undefined) position = p;
    }
    return position;
  }

  /** Decides the stream's messages in line order on its folded state (evolved with the events decided). */
  private decideStream(entry: StreamEntry, indexes: number[], batch: RecordingBatch): { events: EventToAppend[]; local: RecordOutcome[] } {
    const { messages, directories, elsewhere, ctx } = batch;
    const events: EventToAppend[] = [];
    const local: RecordOutcome[] = [];
    for (const i of indexes) {
      const message = messages[i];
      const key = messageKey(message.companyId, message.messageId);
      let decided: ConversationEvent[];
      try {
        decided = decider.decide(
          {
            type: 'RecordMessage',
            data: {
              message,
              directory: directories.get(message.companyId)!,
              recordedInConversation: elsewhere.get(key) ?? this.remembered.get(key) ?? null,
            },
          },
          entry.state,
        );
      } catch (err) {
        if (!(err instanceof DomainError)) throw err;
        local.push({ status: 'rejected', code: err.code, reason: err.message });
        continue;
      }
      const metadata = baseMetadata({ ...ctx, companyId: message.companyId, now: ctx.now ?? this.deps.now });
      for (const e of decided) {
        decider.evolve(entry.state, e);
        const eventId = conversationEventId(message.companyId, message.conversationId, message.messageId, e.type, occurrenceOf(entry.state, e));
        events.push({ type: e.type, data: e.data, metadata: { ...metadata, eventId } });
      }
      local.push(outcomeOf(decided));
    }
    return { events, local };
  }

  /** The later of two positions (undefined: none yet). */
  private later(a: Position | undefined, b: Position | undefined): Position | undefined {
    if (a === undefined) return b;
    if (b === undefined) return a;
    return this.deps.store.comparePositions(a, b) >= 0 ? a : b;
  }

  private settle(indexes: number[], local: RecordOutcome[], outcomes: RecordOutcome[], messages: readonly MessageToRecord[]): void {
    indexes.forEach((i, n) => {
      outcomes[i] = local[n];
      if (local[n].status !== 'rejected') this.remember(messageKey(messages[i].companyId, messages[i].messageId), messages[i].conversationId);
    });
  }

  private remember(key: string, conversationId: string): void {
    this.remembered.delete(key);
    this.remembered.set(key, conversationId);
    while (this.remembered.size > this.maxRemembered) this.remembered.delete(this.remembered.keys().next().value as string);
  }

  /** The stream's folded state, brought up to date; owned by the caller until `put` back. */
  private async take(streamId: string): Promise<StreamEntry> {
    const entry = this.cache.get(streamId) ?? { state: decider.initialState(), nextRevision: 0n };
    this.cache.delete(streamId);
    const newer = await this.deps.store.readStream(streamId, entry.nextRevision);
    for (const e of newer) decider.evolve(entry.state, { type: e.type, data: e.data } as ConversationEvent);
    if (newer.length > 0) entry.nextRevision = newer[newer.length - 1].revision + 1n;
    return entry;
  }

  /**
   * The folded states of several streams, brought up to date, owned by the caller until `put` back: read in one
   * query, except cached streams longer than REREAD_LIMIT events, read on their own from their next revision.
   */
  private async takeMany(streamIds: string[]): Promise<Map<string, StreamEntry>> {
    const entries = new Map<string, StreamEntry>();
    for (const id of streamIds) {
      entries.set(id, this.cache.get(id) ?? { state: decider.initialState(), nextRevision: 0n });
      this.cache.delete(id);
    }
    const long = streamIds.filter((id) => entries.get(id)!.nextRevision > REREAD_LIMIT);
    const read = await this.deps.store.readStreams(streamIds.filter((id) => entries.get(id)!.nextRevision <= REREAD_LIMIT));
    const newer = await Promise.all(long.map((id) => this.deps.store.readStream(id, entries.get(id)!.nextRevision)));
    long.forEach((id, k) => read.set(id, newer[k]));
    for (const [id, entry] of entries) {
      for (const e of read.get(id)!) {
        if (e.revision < entry.nextRevision) continue;
        decider.evolve(entry.state, { type: e.type, data: e.data } as ConversationEvent);
        entry.nextRevision = e.revision + 1n;
      }
    }
    return entries;
  }

  private put(streamId: string, entry: StreamEntry): void {
    this.cache.set(streamId, entry);
    while (this.cache.size > this.maxCached) this.cache.delete(this.cache.keys().next().value as string);
  }
}

/**
 * The batch cut into runs, in line order, so that no run has one message id of a company in two conversations.
 * A run is decided stream by stream; between runs the earlier lines are settled, so the first line with an id is
 * the one recorded and a later one in another conversation is the duplicate, as when records come one by one.
 */
function runsInLineOrder(messages: readonly MessageToRecord[]): number[][] {
  const runs: number[][] = [];
  let run: number[] = [];
  let conversations = new Map<string, string>();
  messages.forEach((m, i) => {
    const key = messageKey(m.companyId, m.messageId);
    const seen = conversations.get(key);
    if (seen !== undefined && seen !== m.conversationId) {
      runs.push(run);
      run = [];
      conversations = new Map();
    }
    conversations.set(key, m.conversationId);
    run.push(i);
  });
  if (run.length > 0) runs.push(run);
  return runs;
}

const expectedRevisionOf = (entry: StreamEntry): ExpectedRevision => (entry.nextRevision === 0n ? 'no_stream' : entry.nextRevision - 1n);

function outcomeOf(decided: readonly ConversationEvent[]): RecordOutcome {
  if (decided.length === 0) return { status: 'unchanged' };
  switch (decided[0].type) {
    case 'MessageRecorded': return { status: 'recorded' };
    case 'MessageDeleted': return { status: 'deleted' };
    case 'MessageRestored': return { status: 'restored' };
  }
}

function groupByStream(messages: readonly MessageToRecord[], indexes: readonly number[]): Map<string, number[]> {
  const groups = new Map<string, number[]>();
  for (const i of indexes) {
    const sid = conversationStreamId(messages[i].companyId, messages[i].conversationId);
    const g = groups.get(sid);
    if (g) g.push(i);
    else groups.set(sid, [i]);
  }
  return groups;
}

function namesUnknown(m: MessageToRecord, d: CompanyDirectory): boolean {
  if (!d.companyKnown) return true;
  if (m.author.type === 'agent' && m.author.agentId !== undefined) return !d.agentIds.has(m.author.agentId);
  if (m.author.type === 'human_operator' && m.author.operatorId !== undefined) return !d.operatorIds.has(m.author.operatorId);
  return false;
}

/**
 * Brings the `conversations` read model up to the head of the log (or to `until`, a position the caller
 * appended, when that is further: the readable head trails commits while older transactions run). Applies the
 * batches itself when no other process holds the projection (CLI), else waits for the process that does.
 */
export async function catchUpConversations(
  deps: Pick<RecorderDeps, 'runner' | 'store' | 'pool'>,
  options: { until?: Position; timeoutMs?: number } = {},
): Promise<void> {
  const { runner, store, pool } = deps;
  const head = await store.headPosition();
  const until = options.until;
  const target = until !== undefined && (head === START || store.comparePositions(until, head) > 0) ? until : head;
  if (target === START) return;
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  for (;;) {
    const read = await runner.runBatch(conversationsProjection);
    if (read === -1) {
      await runner.waitFor(target, [conversationsProjection], Math.max(1, deadline - Date.now()));
      return;
    }
    if (read > 0) continue;
    const cp = await readCheckpoint(pool, conversationsProjection.name);
    if (cp && cp.position !== START && store.comparePositions(cp.position, target) >= 0) return;
    if (Date.now() > deadline) throw new ReadModelTimeoutError(`the conversations read model did not reach ${target} in time`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
