import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import type { ContactEvent, ContactPhoneEvent } from '../../events/contacts';
import { type EventStore, type EventToAppend, type Position, type RecordedEvent, WrongExpectedRevisionError } from '../../ports/event-store';
import { loadContactList } from '../../projections/contacts/queries';
import { baseMetadata, type CommandContext, type ReadModelWaiter } from '../handle';
import {
  contactPhoneStreamId,
  contactStreamId,
  type ContactState,
  decideContact,
  evolveContact,
  type ExistingContact,
  initialContactState,
  type PhoneClaimState,
  phoneClaimDecider,
  type UpsertContact,
  versionedFields,
  visibleHolders,
} from './decider';
import { nextContactId } from './ids';
import type { ContactListInfo } from './model';
import type { UpsertInput } from './upsert-input';

// The upsert's write path (ARCHITECTURE section 3, over two streams):
//   1. read the number's claim stream contactphone-{companyId}-{e164}: which contacts hold it;
//   2. none: validate (decide on the empty state), take an id from the sequence, append ContactPhoneClaimed with
//      the expected revision the read saw (no_stream for a new number) and then the contact's events with
//      no_stream. A concurrent create of the same number loses the claim append, re-reads, and updates the
//      winner's contact instead;
//   3. one: load that contact, decide, append with its revision (on a conflict: re-read and retry);
//   4. more than one (possible only through fixtures): ambiguous, 409.
// A claim whose contact stream is still empty (the claimer is between its two appends, or died there) is
// completed by whoever gets there: the contact append with no_stream decides who creates it.
// Upserts of one number in this process run one at a time (a keyed lock), so they do not spin on conflicts.

export interface ContactDeps {
  store: EventStore;
  pool: Pool;
  runner: ReadModelWaiter;
  now: () => Date;
}

export interface UpsertResult {
  created: boolean;
  /** the decided state (what the response echoes) */
  contact: ExistingContact;
  /** the contact's list with its custom-field definitions (every field is echoed) */
  list: ContactListInfo;
  versionedCustomFields: Array<{ customFieldId: number; key: string; version: number }>;
  /** events appended by this call */
  events: ContactEvent[];
}

/** More than one (non-test) contact of the company holds the number: no contact is chosen arbitrarily. */
export class AmbiguousPhoneError extends Error {
  override name = 'AmbiguousPhoneError';
  constructor(
    readonly phone: string,
    readonly contactIds: number[],
  ) {
    super(`more than one contact of this company has the number ${phone} (contacts ${contactIds.join(', ')})`);
  }
}

const MAX_ATTEMPTS = 100;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const foldContact = (events: readonly RecordedEvent[]): ContactState =>
  events.reduce((s, e) => evolveContact(s, { type: e.type, data: e.data } as ContactEvent), initialContactState());

export const foldClaims = (events: readonly RecordedEvent[]): PhoneClaimState =>
  events.reduce((s, e) => phoneClaimDecider.evolve(s, { type: e.type, data: e.data } as ContactPhoneEvent), phoneClaimDecider.initialState());

const expectedAfter = (events: readonly RecordedEvent[]) => (events.length === 0 ? ('no_stream' as const) : events[events.length - 1].revision);

export function toAppend(events: ReadonlyArray<{ type: string; data: unknown }>, ctx: CommandContext): EventToAppend[] {
  const meta = baseMetadata(ctx);
  return events.map((e) => ({ type: e.type, data: e.data, metadata: { ...meta, eventId: randomUUID() } }));
}

// ---- keyed in-process lock -------------------------------------------------------------------------------------
const tails = new Map<string, Promise<void>>();
export async function withKeyLock<T>(key: string, fn: () => Promise<T>): Promise<T> {
  const previous = tails.get(key) ?? Promise.resolve();
  let release!: () => void;
  const mine = new Promise<void>((r) => (release = r));
  const tail = previous.then(() => mine);
  tails.set(key, tail);
  await previous;
  try {
    return await fn();
  } finally {
    release();
    if (tails.get(key) === tail) tails.delete(key);
  }
}

export async function upsertContact(deps: ContactDeps, companyId: number, input: UpsertInput, ctx: CommandContext): Promise<UpsertResult> {
  return withKeyLock(`${companyId}|${input.phone}`, () => upsertUnlocked(deps, companyId, input, ctx));
}

/**
 * The upsert without the in-process lock: concurrent calls are serialised by the event store alone (what several
 * processes see). Exported for tests that prove that.
 */
export async function upsertUnlocked(deps: ContactDeps, companyId: number, input: UpsertInput, ctx: CommandContext): Promise<UpsertResult> {
  const claimStream = contactPhoneStreamId(companyId, input.phone);
  const context: CommandContext = { ...ctx, companyId, now: ctx.now ?? deps.now, correlationId: ctx.correlationId ?? randomUUID() };
  const command = (contactId: number, list: ContactListInfo | null): UpsertContact => ({
    type: 'UpsertContact',
    companyId,
    contactId,
    phone: input.phone,
    requestedListId: input.contactListId,
    list,
    profile: input.profile,
    customFields: input.customFields,
    now: (context.now as () => Date)().toISOString(),
    mode: 'api',
  });

  for (let attempt = 1; ; attempt++) {
    if (attempt > MAX_ATTEMPTS) throw new Error(`upsert of ${input.phone}: gave up after ${MAX_ATTEMPTS} conflicting attempts`);
    if (attempt > 1) await sleep(Math.random() * Math.min(20, attempt * 2));
    try {
      // the claim and the requested (or default) list are independent: read both at once
      const [claimEvents, requestedList] = await Promise.all([
        deps.store.readStream(claimStream),
        loadContactList(deps.pool, companyId, input.contactListId ?? null),
      ]);
      const holders = visibleHolders(foldClaims(claimEvents));
      if (holders.length > 1) throw new AmbiguousPhoneError(input.phone, holders);

      if (holders.length === 1) {
        const contactId = holders[0];
        const stream = contactStreamId(companyId, contactId);
        const stored = await deps.store.readStream(stream);
        const state = foldContact(stored);
        const list = !state.exists || state.contactListId === requestedList?.id
          ? requestedList
          : await loadContactList(deps.pool, companyId, state.contactListId);
        const cmd = command(contactId, list);
        const events = decideContact(cmd, state);
        let position: Position | undefined;
        if (events.length > 0) position = (await deps.store.append(stream, toAppend(events, context), expectedAfter(stored))).position;
        return await finish(deps, state, events, list, position);
      }

      // Nobody holds the number: validate before reserving anything, so an invalid request leaves no trace.
      const list = requestedList;
      decideContact(command(1, list), initialContactState());
      const contactId = await nextContactId(deps.pool);
      const stream = contactStreamId(companyId, contactId);
      if ((await deps.store.readStream(stream)).length > 0) continue; // a fixture contact owns this id: take another
      const events = decideContact(command(contactId, list), initialContactState());
      const claim = phoneClaimDecider.decide(
        { type: 'ClaimPhone', companyId, phone: input.phone, contactId, isTest: false, mode: 'api' },
        foldClaims(claimEvents),
      );
      await deps.store.append(claimStream, toAppend(claim, context), expectedAfter(claimEvents));
      const { position } = await deps.store.append(stream, toAppend(events, context), 'no_stream');
      return await finish(deps, initialContactState(), events, list, position);
    } catch (err) {
      if (err instanceof WrongExpectedRevisionError) continue;
      throw err;
    }
  }
}

async function finish(
  deps: ContactDeps,
  before: ContactState,
  events: ContactEvent[],
  list: ContactListInfo | null,
  position: Position | undefined,
): Promise<UpsertResult> {
  const after = events.reduce(evolveContact, before);
  if (!after.exists) throw new Error('upsert decided no contact'); // unreachable: decide creates or throws
  await deps.runner.waitForEvents(position, events.map((e) => e.type));
  return {
    created: !before.exists,
    contact: after,
    list: list ?? { id: after.contactListId, name: '', isDefault: false, fields: [] },
    versionedCustomFields: versionedFields(events),
    events,
  };
}
