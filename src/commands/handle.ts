import { randomUUID } from 'node:crypto';
import {
  type EventMetadata,
  type EventStore,
  type Position,
  WrongExpectedRevisionError,
} from '../ports/event-store';
import type { Decider } from './decider';
import type { ReadModelWaiter } from '../ports/read-models';

/** Who and what caused a command: becomes the metadata of every event it appends. */
export interface CommandContext {
  actor: string;
  companyId: number | null;
  correlationId?: string;
  causationId?: string | null;
  /** injectable clock */
  now?: () => Date;
  /**
   * Deterministic event ids for commands caused by a retried external record (a Kafka record, a seed line):
   * the same input yields the same ids, so a re-append is recognised instead of duplicated.
   */
  eventIdFor?: (index: number, event: { type: string }) => string;
}

export interface HandleResult<E, S> {
  events: E[];
  state: S;
  /** position of the last appended event; undefined when the decider decided nothing */
  position: Position | undefined;
  alreadyAppended: boolean;
}

const MAX_CONFLICT_RETRIES = 10;

/** Load (fold the stream), decide, append with the expected revision; on a conflict reload and retry (bounded). */
export async function handleCommand<C, E extends { type: string; data: unknown }, S>(
  store: EventStore,
  streamId: string,
  decider: Decider<C, E, S>,
  command: C,
  ctx: CommandContext,
): Promise<HandleResult<E, S>> {
  for (let attempt = 0; ; attempt++) {
    const stored = await store.readStream(streamId);
    let state = decider.initialState();
    for (const e of stored) state = decider.evolve(state, { type: e.type, data: e.data } as E);
    const events = decider.decide(command, state);
    if (events.length === 0) return { events, state, position: undefined, alreadyAppended: false };
    const expected = stored.length === 0 ? ('no_stream' as const) : stored[stored.length - 1].revision;
    const metadata = baseMetadata(ctx);
    try {
      const result = await store.append(
        streamId,
        events.map((e, i) => ({
          type: e.type,
          data: e.data,
          metadata: { ...metadata, eventId: ctx.eventIdFor ? ctx.eventIdFor(i, e) : randomUUID() },
        })),
        expected,
      );
      for (const e of events) state = decider.evolve(state, e);
      return { events, state, position: result.position, alreadyAppended: result.alreadyAppended };
    } catch (err) {
      if (err instanceof WrongExpectedRevisionError && attempt < MAX_CONFLICT_RETRIES) continue;
      throw err;
    }
  }
}

export function baseMetadata(ctx: CommandContext): Omit<EventMetadata, 'eventId'> {
  const correlationId = ctx.correlationId ?? randomUUID();
  return {
    correlationId,
    causationId: ctx.causationId ?? null,
    companyId: ctx.companyId,
    actor: ctx.actor,
    at: (ctx.now ?? (() => new Date()))().toISOString(),
  };
}

/** What the write path waits on for read-your-writes (the projection runner implements it). */
export type { ReadModelWaiter } from '../ports/read-models';

/**
 * The write path of ARCHITECTURE section 3: handle the command, then return only once the projections
 * affected by the appended events have applied them, so a client reading after the response sees its write.
 */
export async function executeCommand<C, E extends { type: string; data: unknown }, S>(
  deps: { store: EventStore; waiter: ReadModelWaiter },
  streamId: string,
  decider: Decider<C, E, S>,
  command: C,
  ctx: CommandContext,
): Promise<HandleResult<E, S>> {
  const result = await handleCommand(deps.store, streamId, decider, command, ctx);
  await deps.waiter.waitForEvents(result.position, result.events.map((e) => e.type));
  return result;
}
