import { randomUUID } from 'node:crypto';
import type { Services } from '../../services';
import type { ContactEvent, ContactSource } from '../../events/contacts';
import { loadContactList } from '../../projections/contacts/queries';
import { normalizePhone } from '../../shared/phone';
import type { Position } from '../../ports/event-store';
import { DomainError } from '../decider';
import { awaitReadModels } from '../provisioning/read-models';
import type { CommandContext } from '../handle';
import {
  contactPhoneStreamId,
  contactStreamId,
  type ContactState,
  decideContact,
  initialContactState,
  phoneClaimDecider,
  type UpsertContact,
} from './decider';
import { foldClaims, foldContact, toAppend } from './handler';
import { nextContactId, reserveContactIdsUpTo } from './ids';
import { canonicalInstant, type ContactListInfo } from './model';

/** A contact of the provisioning fixture (`../shared/contracts/fixture.md`), already validated by the seed. */
export interface FixtureContact {
  id?: number;
  contactListId: number;
  fullName: string | null;
  phone: string;
  email: string | null;
  source: string;
  sourceDetail: string | null;
  profilePicture: string | null;
  isTest: boolean;
  createdAt: string;
  customFields: Array<{ key: string; value: unknown[]; expiresAt: string | null }>;
}

export interface FixtureContactsResult {
  created: number;
  changed: number;
  unchanged: number;
}

export class FixtureContactsError extends Error {
  override name = 'FixtureContactsError';
  constructor(
    readonly companyId: number,
    readonly problems: Array<{ path: string; message: string }>,
  ) {
    super(`contacts of company ${companyId} rejected:\n${problems.map((p) => `  ${p.path}: ${p.message}`).join('\n')}`);
  }
}

/**
 * Checks the fixture contacts need nothing but the document for (phones): the provisioning validation can call it
 * before appending anything. Paths are relative to the company (`contacts[0].phone`).
 */
export function checkFixtureContacts(contacts: readonly Pick<FixtureContact, 'phone'>[]): Array<{ path: string; message: string }> {
  return contacts.flatMap((c, i) =>
    normalizePhone(c.phone) ? [] : [{ path: `contacts[${i}].phone`, message: `${JSON.stringify(c.phone)} is not a valid phone number` }],
  );
}

interface Planned {
  companyId: number;
  index: number;
  contact: FixtureContact;
  phone: string;
  list: ContactListInfo;
  /** undefined: a new contact without a fixture id (generated at apply time) */
  contactId: number | undefined;
  state: ContactState;
  revision: bigint | 'no_stream';
}

/**
 * Creates or updates the fixture's contacts of one company (idempotent: a second identical seed appends nothing).
 * A contact is identified by its fixture id, or without one by its number within its list. Phone and list of an
 * existing contact cannot change through a fixture. Custom fields given are set (grouped fields and past expiries
 * allowed: this is provisioning, not the API); fields not given keep their values. The whole company's contacts
 * are validated before anything is appended.
 */
export async function seedFixtureContacts(
  services: Services,
  companyId: number,
  contacts: FixtureContact[],
  ctx: { actor: string; correlationId: string },
): Promise<FixtureContactsResult> {
  const result: FixtureContactsResult = { created: 0, changed: 0, unchanged: 0 };
  if (contacts.length === 0) return result;
  const context: CommandContext = { actor: ctx.actor, companyId, correlationId: ctx.correlationId ?? randomUUID(), now: services.now };
  const now = services.now().toISOString();

  // 1. plan and validate everything
  const problems: Array<{ path: string; message: string }> = [];
  const planned: Planned[] = [];
  for (const [index, contact] of contacts.entries()) {
    const at = `contacts[${index}]`;
    const phone = normalizePhone(contact.phone);
    if (!phone) {
      problems.push({ path: `${at}.phone`, message: `${JSON.stringify(contact.phone)} is not a valid phone number` });
      continue;
    }
    const list = await loadContactList(services.pool, companyId, contact.contactListId);
    if (!list) {
      problems.push({ path: `${at}.contactListId`, message: `contact list ${contact.contactListId} does not exist in company ${companyId}` });
      continue;
    }
    let contactId = contact.id;
    let stored = contactId !== undefined ? await services.store.readStream(contactStreamId(companyId, contactId)) : [];
    if (contactId === undefined) {
      // identified by number within its list
      for (const claim of foldClaims(await services.store.readStream(contactPhoneStreamId(companyId, phone))).claims) {
        const events = await services.store.readStream(contactStreamId(companyId, claim.contactId));
        const s = foldContact(events);
        if (s.exists && s.contactListId === list.id) {
          contactId = claim.contactId;
          stored = events;
          break;
        }
      }
    }
    const state = foldContact(stored);
    if (state.exists) {
      if (state.phone !== phone) problems.push({ path: `${at}.phone`, message: `contact ${state.contactId} has the number ${state.phone}; a contact's phone cannot change` });
      if (state.contactListId !== list.id) problems.push({ path: `${at}.contactListId`, message: `contact ${state.contactId} belongs to list ${state.contactListId}; a contact's list cannot change` });
    }
    const p: Planned = { companyId, index, contact, phone, list, contactId, state, revision: stored.length ? stored[stored.length - 1].revision : 'no_stream' };
    try {
      decideContact(command(p, contactId ?? 1, now), state);
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      problems.push({ path: `${at}.customFields`, message: err.message });
      continue;
    }
    planned.push(p);
  }
  if (problems.length > 0) throw new FixtureContactsError(companyId, problems);

  // 2. apply the differences (generated ids only once the fixture's own ids are reserved)
  const fixtureIds = explicitContactIds(contacts);
  await reserveFixtureContactIds(services, fixtureIds);
  let last: Position | undefined;
  const types = new Set<string>();
  for (const p of planned) {
    const contactId = p.contactId ?? (await generatedContactId(services, companyId, fixtureIds));
    // the number's claim (idempotent: a claim this contact already holds appends nothing)
    const claimStream = contactPhoneStreamId(companyId, p.phone);
    const claimEvents = await services.store.readStream(claimStream);
    const claim = phoneClaimDecider.decide(
      { type: 'ClaimPhone', companyId, phone: p.phone, contactId, isTest: p.contact.isTest, mode: 'seed' },
      foldClaims(claimEvents),
    );
    if (claim.length > 0) {
      await services.store.append(claimStream, toAppend(claim, context), claimEvents.length ? claimEvents[claimEvents.length - 1].revision : 'no_stream');
    }
    const events: ContactEvent[] = decideContact(command(p, contactId, now), p.state);
    if (events.length === 0) {
      result.unchanged++;
      continue;
    }
    const r = await services.store.append(contactStreamId(companyId, contactId), toAppend(events, context), p.revision);
    last = r.position;
    events.forEach((e) => types.add(e.type));
    for (const e of events) services.metrics.eventsAppended.labels(e.type).inc();
    if (p.state.exists) result.changed++;
    else result.created++;
  }
  // read-your-writes for the seed, whether or not this process runs the projection runner (the CLI does not)
  if (last) await awaitReadModels(services, last, [...types], 30_000, 'the seeded contacts');
  return result;
}

/** The ids the fixture gives its contacts itself: a generated id is never one of them. */
function explicitContactIds(contacts: readonly FixtureContact[]): Set<number> {
  return new Set(contacts.flatMap((c) => (c.id === undefined ? [] : [c.id])));
}

/** Moves generated ids past the fixture's largest own id, before the seed hands out any. */
async function reserveFixtureContactIds(services: Services, fixtureIds: ReadonlySet<number>): Promise<void> {
  let largest = 0;
  for (const id of fixtureIds) largest = Math.max(largest, id);
  if (largest > 0) await reserveContactIdsUpTo(services.pool, largest);
}

/** A generated id for a new contact: none of the fixture's own ids, and no stored contact's. */
async function generatedContactId(services: Services, companyId: number, fixtureIds: ReadonlySet<number>): Promise<number> {
  for (;;) {
    const id = await nextContactId(services.pool);
    if (fixtureIds.has(id)) continue;
    if ((await services.store.readStream(contactStreamId(companyId, id))).length === 0) return id;
  }
}

function command(p: Planned, contactId: number, now: string): UpsertContact {
  const c = p.contact;
  return {
    type: 'UpsertContact',
    companyId: p.companyId,
    contactId,
    phone: p.phone,
    requestedListId: p.list.id,
    list: p.list,
    profile: {
      fullName: c.fullName,
      email: c.email === '' ? null : c.email,
      source: c.source as ContactSource,
      sourceDetail: c.sourceDetail === '' ? null : c.sourceDetail,
      profilePicture: c.profilePicture === '' ? null : c.profilePicture,
    },
    customFields: c.customFields.map((f, index) => ({
      index,
      key: f.key,
      value: f.value,
      expiresAt: f.expiresAt === null ? null : canonicalInstant(f.expiresAt),
    })),
    now,
    mode: 'seed',
    isTest: c.isTest,
    createdAt: canonicalInstant(c.createdAt),
  };
}
