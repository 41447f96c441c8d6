import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import type { ContactEvent, ContactPhoneEvent } from '../../events/contacts';
import { type AppendResult, type EventStore, type EventToAppend, type ExpectedRevision, type Position, type RecordedEvent, WrongExpectedRevisionError } from '../../ports/event-store';
import { DomainError } from '../decider';
import { type ContactAtRevision, loadContactList, loadUpsertSnapshot } from '../../projections/contacts/queries';
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
//   0. first, decide on the contacts read model (one query: the number's claims, the holder's state at its stream
//      revision, the lists) and append with that revision, or create with the claim expected as no_stream; if the
//      read model was stale the append fails and the steps below run on the streams themselves;
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
  /** optional: what this process's last upsert of a number left (see UpsertMemory) */
  memory?: UpsertMemory;
}

/** What an upsert of a number decided on and left: the number's claims, the holder's state at its revision, its list. */
export interface KnownContact {
  claims: ReadonlyArray<{ contactId: number; isTest: boolean }>;
  contact: ContactAtRevision;
  list: ContactListInfo | null;
}

/**
 * A per-process memory of the last upsert of each number, provided by the HTTP layer, which keeps it valid with the
 * contacts read model's change signals (src/http/contact-cache.ts). An upsert that finds its number there decides
 * on it without reading anything and appends with the remembered revision, so a contact changed meanwhile (by
 * anyone) fails the append and the upsert reads again. Claims and list definitions cannot be checked that way: the
 * provider forgets a number when its claims change and a company's numbers when its lists or fields change, and
 * never remembers across a change it may have missed (`ticket`).
 */
export interface UpsertMemory {
  /** taken before reading what `remember` will store: a change signalled after it keeps `remember` from storing */
  ticket(): unknown;
  recall(companyId: number, phone: string): KnownContact | undefined;
  remember(ticket: unknown, companyId: number, phone: string, known: KnownContact): void;
  forget(companyId: number, phone: string): void;
  /** the list (with its field definitions) a new contact gets for `listId` (null: the default list), as last read */
  recallList(companyId: number, listId: number | null): ContactListInfo | undefined;
  rememberList(ticket: unknown, companyId: number, listId: number | null, list: ContactListInfo): void;
  /** whether the company's numbers this process did not remember have lately been new ones */
  expectsNew(companyId: number): boolean;
  /** what a number this process did not remember turned out to be */
  observe(companyId: number, wasNew: boolean): void;
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

  const memory = deps.memory;
  /** the number's holder after a successful upsert: remembered for the next upsert of the number (see UpsertMemory) */
  const remember = (ticket: unknown, claims: KnownContact['claims'], result: UpsertResult, revision: bigint) => {
    if (!memory) return;
    const { exists: _exists, ...contact } = result.contact;
    memory.remember(ticket, companyId, input.phone, { claims, contact: { ...contact, fields: new Map(contact.fields), revision }, list: result.list });
  };

  // Creates a contact for a number nobody holds: validate before reserving anything (an invalid request leaves
  // no trace), take an id, then claim the number (with the claim stream's revision as read) and create the contact
  // in one appendMany. On Postgres that is one statement, all or nothing: a contact stream that exists already (a
  // fixture contact owns the id) fails the whole append and another id is taken. EventStoreDB appends the streams
  // one after the other, so there the id is checked first.
  const create = async (
    list: ContactListInfo | null,
    claimRevision: ExpectedRevision,
    claims: PhoneClaimState,
    ticket: unknown,
  ): Promise<UpsertResult | 'id_taken'> => {
    decideContact(command(1, list), initialContactState());
    const contactId = await nextContactId(deps.pool);
    const stream = contactStreamId(companyId, contactId);
    if (!deps.store.appendManyIsAtomic && (await deps.store.readStream(stream)).length > 0) return 'id_taken';
    const events = decideContact(command(contactId, list), initialContactState());
    const claim = phoneClaimDecider.decide({ type: 'ClaimPhone', companyId, phone: input.phone, contactId, isTest: false, mode: 'api' }, claims);
    let appended: AppendResult;
    try {
      [, appended] = await deps.store.appendMany([
        { streamId: claimStream, events: toAppend(claim, context), expected: claimRevision },
        { streamId: stream, events: toAppend(events, context), expected: 'no_stream' },
      ]);
    } catch (err) {
      if (err instanceof WrongExpectedRevisionError && err.streamId === stream) return 'id_taken';
      throw err;
    }
    const result = await finish(deps, initialContactState(), events, list, appended.position);
    remember(ticket, [...claims.claims, { contactId, isTest: false }], result, appended.nextRevision);
    return result;
  };

  // Updates the number's one holder, decided on `state` at `revision` (from memory, the read model or its stream).
  const update = async (state: ExistingContact, revision: ExpectedRevision, list: ContactListInfo | null, claims: KnownContact['claims'], ticket: unknown) => {
    const events = decideContact(command(state.contactId, list), state);
    if (events.length === 0) {
      const unchanged = await finish(deps, state, events, list, undefined);
      if (typeof revision === 'bigint') remember(ticket, claims, unchanged, revision);
      return unchanged;
    }
    const appended = await deps.store.append(contactStreamId(companyId, state.contactId), toAppend(events, context), revision);
    const result = await finish(deps, state, events, list, appended.position);
    remember(ticket, claims, result, appended.nextRevision);
    return result;
  };

  // 1. This process's last upsert of the number, if it remembers one: nothing to read. Only an append is trusted
  //    that way (its expected revision proves the state current); a decision to change nothing, or a refusal, is
  //    made again on the read model.
  //    A number it does not remember, while such numbers have lately been new ones (bulk imports), is created on
  //    the remembered list, also without reading: if anyone holds the number, its claim stream exists and the
  //    claim's no_stream append fails. That failure, or a request invalid as a create, goes on to step 2. While
  //    such numbers have lately been existing ones (syncs), step 2 comes first: a failed create costs more than
  //    the read it saves (docs/contacts.md, "Performance").
  // 2. The read model (one query). It may lag the event log, never in a way that changes the outcome: an update
  //    appends with the revision the read model had (a stale state fails the append), a create claims the number
  //    with no_stream (a claim the read model did not show yet fails it), and claims only ever grow (more than one
  //    holder stays more than one).
  // 3. On a conflict, or when the read model shows a claim without its contact or only test claims: the streams.
  let step: 'memory' | 'read model' | 'streams' = memory ? 'memory' : 'read model';
  /** the memory knew nothing of the number and what it turned out to be is not observed yet */
  let unremembered = false;
  for (let attempt = 1; ; attempt++) {
    if (attempt > MAX_ATTEMPTS) throw new Error(`upsert of ${input.phone}: gave up after ${MAX_ATTEMPTS} conflicting attempts`);
    if (step === 'streams' && attempt > 2) await sleep(Math.random() * Math.min(20, attempt * 2));
    const ticket = memory?.ticket();
    try {
      if (step === 'memory') {
        step = 'read model';
        const known = memory?.recall(companyId, input.phone);
        if (known) {
          const { revision, ...contact } = known.contact;
          const state: ExistingContact = { exists: true, ...contact };
          let events: ContactEvent[] = [];
          try {
            events = decideContact(command(state.contactId, known.list), state);
          } catch (err) {
            if (!(err instanceof DomainError)) throw err;
          }
          if (events.length > 0) {
            try {
              return await update(state, revision, known.list, known.claims, ticket);
            } catch (err) {
              if (!(err instanceof WrongExpectedRevisionError)) throw err;
              memory?.forget(companyId, input.phone);
            }
          }
        } else if (memory) {
          unremembered = true;
          const list = memory.expectsNew(companyId) ? memory.recallList(companyId, input.contactListId ?? null) : undefined;
          if (list) {
            try {
              const created = await create(list, 'no_stream', phoneClaimDecider.initialState(), ticket);
              if (created !== 'id_taken') {
                memory.observe(companyId, true);
                return created;
              }
            } catch (err) {
              if (err instanceof WrongExpectedRevisionError && err.streamId === claimStream) {
                memory.observe(companyId, false);
                unremembered = false;
              } else if (!(err instanceof WrongExpectedRevisionError) && !(err instanceof DomainError)) throw err;
            }
          }
        }
      }

      if (step === 'read model') {
        step = 'streams';
        const snap = await loadUpsertSnapshot(deps.pool, companyId, input.phone, input.contactListId ?? null);
        if (snap.requested) memory?.rememberList(ticket, companyId, input.contactListId ?? null, snap.requested);
        if (unremembered) memory?.observe(companyId, snap.claims.length === 0);
        const holders = snap.claims.filter((c) => !c.isTest).map((c) => c.contactId);
        if (holders.length > 1) throw new AmbiguousPhoneError(input.phone, holders);
        const holder = holders.length === 1 ? snap.contacts.find((c) => c.contactId === holders[0]) : undefined;
        if (holder) {
          const { revision, ...contact } = holder;
          const list = holder.contactListId === snap.requested?.id ? snap.requested : (snap.lists.get(holder.contactListId) ?? null);
          return await update({ exists: true, ...contact }, revision, list, snap.claims, ticket);
        }
        if (snap.claims.length === 0) {
          const created = await create(snap.requested, 'no_stream', phoneClaimDecider.initialState(), ticket);
          if (created !== 'id_taken') return created;
        }
        continue; // read the streams
      }

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
        if (state.exists) return await update(state, expectedAfter(stored), list, foldClaims(claimEvents).claims, ticket);
        // the claimer is between its two appends, or died there: complete the creation under the claimed id
        const events = decideContact(command(contactId, list), state);
        const { position } = await deps.store.append(stream, toAppend(events, context), 'no_stream');
        return await finish(deps, state, events, list, position);
      }

      // Nobody holds the number.
      const created = await create(requestedList, expectedAfter(claimEvents), foldClaims(claimEvents), ticket);
      if (created !== 'id_taken') return created;
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
