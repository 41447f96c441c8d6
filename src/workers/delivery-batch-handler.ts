// The delivery consumer's batch handler (the "Batches" part of delivery-consumer.ts's header): records grouped in
// lanes, statuses of known single-send or bulk owners decided in memory and appended at once, other lanes (and
// refused batch appends) on the per-record path.
import type { Services } from '../services';
import { fold } from '../commands/decider';
import { sendDecider, type SendState } from '../commands/send/decider';
import type { SendEvent } from '../events/sends';
import { DuplicateEventIdError, type EventToAppend, type StreamAppend, WrongExpectedRevisionError } from '../ports/event-store';
import { type BatchHandler, PoisonRecordError, type IncomingRecord, type RecordOutcome } from '../ports/transport';
import type { ProviderMessageOwner } from '../projections/sends/queries';
// [bulk sends, issue 5] bulk recipients own provider message ids too: owner lookup and applier in src/commands/bulk/delivery.ts
import { decideBulkStatuses } from '../commands/bulk/delivery';
import type { ProviderStatusUpdate } from '../commands/delivery-status';
import { isObject, parseStatusRecord, tooDeepReason } from './delivery-status-parsing';
import { type DeliveryConsumerOptions, deliveryCore } from './delivery-record-handler';
import { findOwnersAndParked, waitForOwners } from './provider-message-owners';
import { parkStatuses } from './parked-statuses';
import { countAppended, decideStatus, statusEvents } from './send-status-applier';

const poison = (reason: string): RecordOutcome => ({ kind: 'poison', reason });
const OK: RecordOutcome = { kind: 'ok' };

/** Runs `fn` over `items` with at most `limit` at once. */
async function eachLimited<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(Math.max(1, limit), items.length) }, worker));
}

export function batchHandlerOver(services: Services, options: DeliveryConsumerOptions, core: ReturnType<typeof deliveryCore>): BatchHandler {
  const { owners, sendCache, handleRecord, parking } = core;
  const concurrency = options.keyedConcurrency ?? 16;
  const ownerWaitMs = options.ownerWaitMs ?? 500;

  /** Per-record path over lanes: lanes at once, a lane's records one after the other; a transient failure stops its lane. */
  const runLanes = async (records: IncomingRecord[], lanes: number[][], outcomes: Array<RecordOutcome | undefined>) => {
    await eachLimited(lanes, concurrency, async (lane) => {
      for (let k = 0; k < lane.length; k++) {
        const i = lane[k];
        try {
          await handleRecord(records[i]);
          outcomes[i] = OK;
        } catch (err) {
          if (err instanceof PoisonRecordError || (err instanceof Error && err.name === 'PoisonRecordError')) {
            outcomes[i] = poison((err as PoisonRecordError).reason || err.message);
            continue;
          }
          // not applied: neither is the rest of the lane (its order is kept)
          for (const j of lane.slice(k)) outcomes[j] = { kind: 'retry', error: err };
          return;
        }
      }
    });
  };

  interface SendItem {
    i: number;
    update: ProviderStatusUpdate;
    owner: ProviderMessageOwner;
  }

  /** Batched path: statuses of single sends with known owners, lanes given in record order. */
  const applyBatched = async (records: IncomingRecord[], lanes: number[][], items: Map<number, SendItem>, outcomes: Array<RecordOutcome | undefined>) => {
    const ordered = lanes.flat().sort((a, b) => a - b).map((i) => items.get(i)!);
    // each stream's state: cached, else read (one query for all the streams not cached)
    const base = new Map<string, { state: SendState; revision: bigint } | undefined>();
    for (const x of ordered) if (!base.has(x.owner.streamId)) base.set(x.owner.streamId, sendCache.get(x.owner.streamId));
    const uncached = [...base].filter(([, entry]) => !entry).map(([id]) => id);
    if (uncached.length > 0) {
      try {
        for (const [id, stored] of await services.store.readStreams(uncached)) {
          if (stored.length === 0) continue; // stays undefined: poison below
          base.set(id, {
            state: fold(sendDecider, stored.map((e) => ({ type: e.type, data: e.data }) as SendEvent)),
            revision: stored[stored.length - 1].revision,
          });
        }
      } catch (err) {
        for (const x of ordered) outcomes[x.i] = { kind: 'retry', error: err };
        return;
      }
    }
    const work = new Map<string, { state: SendState; revision: bigint; decided: SendEvent[]; events: EventToAppend[] }>();
    for (const { i, update, owner } of ordered) {
      let w = work.get(owner.streamId);
      if (!w) {
        const entry = base.get(owner.streamId);
        if (!entry) {
          outcomes[i] = poison(`send stream ${owner.streamId} is empty`);
          continue;
        }
        w = { state: entry.state, revision: entry.revision, decided: [], events: [] };
        work.set(owner.streamId, w);
      }
      let events: SendEvent[];
      try {
        events = decideStatus(owner, update, w.state);
      } catch (err) {
        if (!(err instanceof PoisonRecordError)) throw err;
        outcomes[i] = poison(err.reason);
        continue;
      }
      outcomes[i] = OK;
      if (events.length === 0) continue;
      w.state = events.reduce(sendDecider.evolve, w.state);
      w.decided.push(...events);
      w.events.push(...statusEvents(owner, update, events, services.now));
    }
    const appends: StreamAppend[] = [];
    const decided: SendEvent[][] = [];
    for (const [streamId, w] of work) {
      if (w.events.length === 0) {
        sendCache.set(streamId, { state: w.state, revision: w.revision }); // nothing to do: keep what was read
        continue;
      }
      appends.push({ streamId, events: w.events, expected: w.revision });
      decided.push(w.decided);
    }
    if (appends.length === 0) return;
    let results;
    try {
      results = await services.store.appendMany(appends);
    } catch (err) {
      for (const a of appends) sendCache.delete(a.streamId);
      if (err instanceof WrongExpectedRevisionError || err instanceof DuplicateEventIdError) {
        // another writer got to one of these streams: each status on its own, recognising what is stored already
        services.logger.debug({ err: (err as Error).message, statuses: ordered.length }, 'batched statuses conflict; applying them one by one');
        for (const x of ordered) outcomes[x.i] = undefined;
        await runLanes(records, lanes, outcomes);
        return;
      }
      for (const x of ordered) outcomes[x.i] = { kind: 'retry', error: err };
      return;
    }
    results.forEach((result, k) => {
      const { streamId } = appends[k];
      if (result.alreadyAppended) {
        sendCache.delete(streamId); // says nothing about the revision: reload next time
        return;
      }
      countAppended(services, decided[k]);
      sendCache.set(streamId, { state: work.get(streamId)!.state, revision: result.nextRevision });
    });
  };

  /**
   * Batched path for bulk recipients: statuses of known owners decided in record order on the recipients' current
   * statuses, one appendMany over their chunk streams. A lane with a recipient found nowhere, or a refused
   * append, goes record by record.
   */
  const applyBulkBatched = async (records: IncomingRecord[], lanes: number[][], items: Map<number, SendItem>, outcomes: Array<RecordOutcome | undefined>) => {
    let decided: Awaited<ReturnType<typeof decideBulkStatuses>>;
    const all = lanes.flat().sort((a, b) => a - b);
    try {
      decided = await decideBulkStatuses(services, all.map((i) => items.get(i)!));
    } catch (err) {
      for (const i of all) outcomes[i] = { kind: 'retry', error: err };
      return;
    }
    if (decided.missing.size > 0) {
      const hasMissing = (lane: number[]) => lane.some((i) => decided.missing.has(items.get(i)!.update.providerMessageId));
      const [batched, single] = [lanes.filter((l) => !hasMissing(l)), lanes.filter(hasMissing)];
      await Promise.all([runLanes(records, single, outcomes), batched.length > 0 ? applyBulkBatched(records, batched, items, outcomes) : undefined]);
      return;
    }
    try {
      if (decided.appends.length > 0) await services.store.appendMany(decided.appends);
      for (const i of all) outcomes[i] = OK;
    } catch (err) {
      if (err instanceof WrongExpectedRevisionError || err instanceof DuplicateEventIdError) {
        services.logger.debug({ err: (err as Error).message, statuses: all.length }, 'batched bulk statuses conflict; applying them one by one');
        await runLanes(records, lanes, outcomes);
        return;
      }
      for (const i of all) outcomes[i] = { kind: 'retry', error: err };
    }
  };

  /** Lanes by what their records need: batched single sends, batched bulk recipients, or record by record. */
  const applyLanes = async (records: IncomingRecord[], lanes: number[][], updates: Map<number, ProviderStatusUpdate>, outcomes: Array<RecordOutcome | undefined>) => {
    // a lane of statuses with known owners of one kind (single sends, or bulk recipients) is batched; any other
    // lane goes record by record
    const batchedLanes: number[][] = [];
    const bulkLanes: number[][] = [];
    const perRecordLanes: number[][] = [];
    const items = new Map<number, SendItem>();
    for (const lane of lanes) {
      const open = lane.filter((i) => outcomes[i] === undefined);
      if (open.length === 0) continue;
      let kind: string | undefined;
      for (const i of open) {
        const update = updates.get(i);
        const owner = update && owners.get(update.providerMessageId);
        if (!update || !owner || (owner.kind !== 'send' && owner.kind !== 'bulk') || (kind !== undefined && owner.kind !== kind)) {
          kind = undefined;
          break;
        }
        kind = owner.kind;
        items.set(i, { i, update, owner });
      }
      (kind === 'send' ? batchedLanes : kind === 'bulk' ? bulkLanes : perRecordLanes).push(open);
    }

    await Promise.all([
      batchedLanes.length > 0 ? applyBatched(records, batchedLanes, items, outcomes) : undefined,
      bulkLanes.length > 0 ? applyBulkBatched(records, bulkLanes, items, outcomes) : undefined,
      perRecordLanes.length > 0 ? runLanes(records, perRecordLanes, outcomes) : undefined,
    ]);
  };

  /**
   * Lanes with statuses whose owner the call's owner query did not find (`waiting`, with parking): one wait for all
   * of them (`waitForOwners`), then the statuses of ids still unknown, or parked meanwhile, parked in one statement in
   * record order, and the lanes' other records applied as any lane (owners found meanwhile are cached by then).
   */
  const settleUnknownOwners = async (
    records: IncomingRecord[], lanes: number[][], updates: Map<number, ProviderStatusUpdate>, waiting: ReadonlySet<string>, outcomes: Array<RecordOutcome | undefined>,
  ) => {
    const open = lanes.flat().filter((i) => outcomes[i] === undefined).sort((a, b) => a - b);
    const statuses = open.filter((i) => waiting.has(updates.get(i)?.providerMessageId ?? ''));
    let toPark: number[];
    try {
      const found = await waitForOwners(services, statuses.map((i) => updates.get(i)!), ownerWaitMs);
      for (const [id, owner] of found.owners) if (!found.parked.has(id)) owners.set(id, owner);
      toPark = statuses.filter((i) => {
        const id = updates.get(i)!.providerMessageId;
        return found.parked.has(id) || !found.owners.has(id);
      });
      await parkStatuses(services.pool, toPark.map((i) => ({ record: records[i], update: updates.get(i)! })));
    } catch (err) {
      for (const i of open) outcomes[i] = { kind: 'retry', error: err };
      return;
    }
    for (const i of toPark) outcomes[i] = OK;
    if (toPark.length > 0) services.logger.info({ statuses: toPark.length }, 'provider statuses parked until their owners are known');
    await applyLanes(records, lanes, updates, outcomes);
  };

  return async (records) => {
    const outcomes: Array<RecordOutcome | undefined> = new Array(records.length);
    const updates = new Map<number, ProviderStatusUpdate>();
    records.forEach((record, i) => {
      const value = record.value;
      const tooDeep = tooDeepReason(value);
      if (!isObject(value)) outcomes[i] = poison('record value is not a JSON object');
      else if (tooDeep !== null) outcomes[i] = poison(tooDeep);
      else if (value.kind === 'message') return; // record by record (its lane is not batched)
      else if (value.kind !== 'status') outcomes[i] = poison(`unknown record kind ${JSON.stringify(value.kind)}`);
      else {
        try {
          const update = parseStatusRecord(value);
          if (update) updates.set(i, update);
          else outcomes[i] = OK; // a status we do not track (e.g. deleted, warning)
        } catch (err) {
          if (!(err instanceof PoisonRecordError)) throw err;
          outcomes[i] = poison(err.reason);
        }
      }
    });

    // one owner query for the provider ids not cached yet (with parking, the same statement names the ids with
    // parked statuses: their owners are not cached, and their statuses here are parked after them, in order)
    const unknownIds = [...new Set([...updates.values()].map((u) => u.providerMessageId).filter((id) => !owners.get(id)))];
    const waiting = new Set<string>(); // with parking: ids neither owned nor parked, to wait for together
    if (unknownIds.length > 0) {
      const found = await findOwnersAndParked(services, unknownIds, parking);
      for (const [id, owner] of found.owners) if (!found.parked.has(id)) owners.set(id, owner);
      if (parking) for (const id of unknownIds) if (!found.owners.has(id) && !found.parked.has(id)) waiting.add(id);
      const toPark = [...updates].filter(([i, u]) => outcomes[i] === undefined && found.parked.has(u.providerMessageId)).sort(([a], [b]) => a - b);
      if (toPark.length > 0) {
        try {
          await parkStatuses(services.pool, toPark.map(([i, update]) => ({ record: records[i], update })));
          for (const [i] of toPark) outcomes[i] = OK;
          services.logger.info({ statuses: toPark.length }, 'provider statuses parked after the parked statuses of their provider ids');
        } catch (err) {
          for (const [i] of toPark) outcomes[i] = { kind: 'retry', error: err };
        }
      }
    }

    // lanes: records sharing a key or a provider message id (union-find over both)
    const parent = new Map<string, string>();
    const find = (x: string): string => {
      let root = x;
      while (parent.get(root) !== root) root = parent.get(root)!;
      for (let y = x; y !== root; ) {
        const up = parent.get(y)!;
        parent.set(y, root);
        y = up;
      }
      return root;
    };
    const tokens = records.map((record, i) => {
      const t = [`k:${record.key ?? `offset:${record.offset ?? i}`}`];
      const u = updates.get(i);
      if (u) t.push(`p:${u.providerMessageId}`);
      for (const x of t) if (!parent.has(x)) parent.set(x, x);
      for (let j = 1; j < t.length; j++) {
        const a = find(t[0]);
        const b = find(t[j]);
        if (a !== b) parent.set(b, a);
      }
      return t[0];
    });
    const lanes = new Map<string, number[]>();
    records.forEach((_, i) => {
      const root = find(tokens[i]);
      const lane = lanes.get(root);
      if (lane) lane.push(i);
      else lanes.set(root, [i]);
    });

    // with parking, the lanes holding a status whose owner is still unknown wait for their owners together (one wait
    // per call, not one per lane), the other lanes meanwhile; without parking, each such status waits in its lane
    const now: number[][] = [];
    const later: number[][] = [];
    for (const lane of lanes.values()) {
      const waits = lane.some((i) => outcomes[i] === undefined && waiting.has(updates.get(i)?.providerMessageId ?? ''));
      (waits ? later : now).push(lane);
    }
    await Promise.all([
      applyLanes(records, now, updates, outcomes),
      later.length > 0 ? settleUnknownOwners(records, later, updates, waiting, outcomes) : undefined,
    ]);

    // per-key order: after a record to retry, nothing of its lane counts as done
    for (const lane of lanes.values()) {
      const first = lane.findIndex((i) => outcomes[i]?.kind === 'retry');
      if (first < 0) continue;
      const failure = outcomes[lane[first]] as Extract<RecordOutcome, { kind: 'retry' }>;
      for (const i of lane.slice(first + 1)) if (outcomes[i]?.kind !== 'retry') outcomes[i] = { kind: 'retry', error: failure.error };
    }
    return outcomes.map((o) => o ?? { kind: 'retry', error: new Error('record left without an outcome') });
  };
}
