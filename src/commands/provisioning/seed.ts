import { randomUUID } from 'node:crypto';
import type { Services } from '../../services';
import { checkFixtureContacts, FixtureContactsError, type FixtureContactsResult, seedFixtureContacts } from '../contact/fixture';
import { type Decider, DomainError, fold } from '../decider';
import { handleCommand } from '../handle';
import type { Position } from '../../ports/event-store';
import { awaitReadModels, readModelsUpToDate } from './read-models';
import { apiKeyDecider, apiKeyStreamId } from './api-key/decider';
import { companyDecider, companyStreamId } from './company/decider';
import { type Fixture, FixtureError, type FixtureIssue, formatPath, validateFixture } from './fixture';
import { apiKeyCommand, companyCommand, phoneNumberCommand } from './from-fixture';
import { phoneNumberDecider, phoneNumberStreamId } from './phone-number/decider';

// `switchboard seed` (and `demo`): provisioning from a fixture document, in three phases.
//  1. validate: the whole document (shape, types, ids, references) and its ids against what is already
//     provisioned for other owners; any problem rejects the document, nothing is appended.
//  2. plan: every aggregate's decider runs against its current stream; a rule broken anywhere (e.g. a revoked
//     key made active again) rejects the document, nothing is appended.
//  3. apply: each aggregate appends its differences (optimistic concurrency, retried); identical documents
//     append nothing. Then the read models are brought up to date and the fixture's contacts are seeded.

const READ_MODEL_TIMEOUT_MS = 60_000;

export interface SeedOptions {
  /** metadata `actor` of every appended event (`cli`, `system`, ...) */
  actor: string;
  onProgress?: (message: string) => void;
}

export interface SeedSummary {
  companies: number;
  /** events appended by this seed */
  appended: number;
  /** aggregates (company, phone number, API key streams) provisioned */
  aggregates: number;
  /** aggregates that needed no event */
  unchanged: number;
  contacts: FixtureContactsResult;
}

interface Step {
  path: (string | number)[];
  label: string;
  streamId: string;
  decider: Decider<any, any, any>;
  command: unknown;
  companyId: number | null;
}

export async function seedFixture(services: Services, document: unknown, options: SeedOptions): Promise<SeedSummary> {
  const progress = options.onProgress ?? (() => undefined);
  const validated = validateFixture(document, services.config.apiKeyPrefix);
  if (!validated.ok) throw new FixtureError(validated.issues);
  const fixture = validated.fixture;
  // What the contacts feature checks on the document alone (phone numbers), before anything is appended.
  const contactIssues = fixture.companies.flatMap((c, ci) =>
    checkFixtureContacts(c.contacts).map((p) => ({ path: `companies[${ci}].${p.path}`, message: withoutPhones(p.path, p.message, c.contacts) })));
  if (contactIssues.length) throw new FixtureError(contactIssues);

  // Read models must be current for the ownership checks.
  await readModelsUpToDate(services, ['accounts', 'business', 'contacts']); // ownership, then the contact lists
  const conflicts = await checkOwnership(services, fixture);
  if (conflicts.length) throw new FixtureError(conflicts);

  const steps = planSteps(services, fixture);
  const issues: FixtureIssue[] = [];
  for (const step of steps) {
    const stored = await services.store.readStream(step.streamId);
    const state = fold(step.decider, stored.map((e) => ({ type: e.type, data: e.data })));
    try {
      step.decider.decide(step.command, state);
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      issues.push({ path: formatPath(step.path), message: err.message });
    }
  }
  if (issues.length) throw new FixtureError(issues);

  const correlationId = randomUUID();
  let appended = 0;
  let unchanged = 0;
  let last: Position | undefined;
  const types = new Set<string>();
  for (const [i, step] of steps.entries()) {
    progress(`seeding ${step.label} (${i + 1}/${steps.length})`);
    const result = await handleCommand(services.store, step.streamId, step.decider, step.command, {
      actor: options.actor,
      companyId: step.companyId,
      correlationId,
      now: services.now,
    });
    if (result.events.length === 0) unchanged++;
    else {
      appended += result.events.length;
      for (const e of result.events) {
        types.add(e.type);
        services.metrics.eventsAppended.labels(e.type).inc();
      }
    }
    if (result.position && (last === undefined || services.store.comparePositions(result.position, last) > 0)) last = result.position;
  }

  // Read-your-writes: the read models these events feed have applied them before contacts (and callers) read.
  progress('updating read models');
  await awaitReadModels(services, last, [...types], READ_MODEL_TIMEOUT_MS);

  const contacts: FixtureContactsResult = { created: 0, changed: 0, unchanged: 0 };
  for (const c of fixture.companies) {
    if (c.contacts.length) progress(`seeding ${c.contacts.length} contacts of company ${c.id}`);
    const r = await seedFixtureContacts(services, c.id, c.contacts, { actor: options.actor, correlationId }).catch((err: unknown) => {
      if (!(err instanceof FixtureContactsError)) throw err;
      throw new FixtureContactsError(err.companyId, err.problems.map((p) => ({ path: p.path, message: withoutPhones(p.path, p.message, c.contacts) })));
    });
    contacts.created += r.created;
    contacts.changed += r.changed;
    contacts.unchanged += r.unchanged;
  }
  return { companies: fixture.companies.length, appended, aggregates: steps.length, unchanged, contacts };
}

/**
 * A problem's message about a fixture contact without the customer's phone number: `seed` prints it to an operator's
 * terminal or a CI log (docs/provisioning.md). An invalid phone is described by its shape (`is not a valid phone
 * number (7 characters, 0 digits)`): its path names the entry. Any other phone in the text, the fixture's as written
 * or a stored one (`contact 9001 has the number +549…`), becomes `[phone]`.
 */
function withoutPhones(path: string, message: string, contacts: ReadonlyArray<{ phone: string }>): string {
  const at = /^contacts\[(\d+)\]\.phone$/.exec(path);
  const own = at ? contacts[Number(at[1])]?.phone : undefined;
  if (own !== undefined && message === `${JSON.stringify(own)} is not a valid phone number`) {
    return `is not a valid phone number (${phoneShape(own)})`;
  }
  let out = message;
  for (const { phone } of contacts) if (phone.trim() !== '') out = out.split(JSON.stringify(phone)).join(PHONE_SHOWN);
  return out.replace(PHONE_IN_TEXT, PHONE_SHOWN);
}

const PHONE_SHOWN = '[phone]';
/** A number written with `+` (6 digits or more, separated or not), as a stored contact's is (`+5491155551234`). */
const PHONE_IN_TEXT = /\+[0-9](?:[ .()-]?[0-9]){5,}/g;

/** What a phone's text is like, without its digits: `7 characters, 0 digits`. */
function phoneShape(text: string): string {
  const chars = [...text].length;
  const digits = text.replace(/\D/g, '').length;
  return `${chars} character${chars === 1 ? '' : 's'}, ${digits} digit${digits === 1 ? '' : 's'}`;
}

/** The one-line summary the CLI prints. */
export function formatSeedSummary(s: SeedSummary): string {
  const contacts = s.contacts.created + s.contacts.changed + s.contacts.unchanged > 0
    ? `; contacts: created ${s.contacts.created}, changed ${s.contacts.changed}, unchanged ${s.contacts.unchanged}`
    : '';
  return `seeded ${s.companies} compan${s.companies === 1 ? 'y' : 'ies'}: appended ${s.appended} events, unchanged ${s.unchanged} of ${s.aggregates} aggregates${contacts}`;
}

function planSteps(services: Services, f: Fixture): Step[] {
  const pepper = services.secrets.apiKeyPepper;
  const steps: Step[] = [];
  f.companies.forEach((c, ci) => {
    steps.push({
      path: ['companies', ci], label: `company ${c.id}`, streamId: companyStreamId(c.id), decider: companyDecider,
      command: companyCommand(c), companyId: c.id,
    });
    c.phoneNumbers.forEach((n, ni) => {
      steps.push({
        path: ['companies', ci, 'phoneNumbers', ni], label: `phone number ${n.id}`, streamId: phoneNumberStreamId(n.id),
        decider: phoneNumberDecider, command: phoneNumberCommand(c.id, n), companyId: c.id,
      });
    });
    c.apiKeys.forEach((k, ki) => {
      const command = apiKeyCommand(pepper, k, { scope: 'company', companyId: c.id });
      steps.push({
        path: ['companies', ci, 'apiKeys', ki], label: `API key "${k.name}"`, streamId: apiKeyStreamId(command.data.keyId),
        decider: apiKeyDecider, command, companyId: c.id,
      });
    });
  });
  f.globalKeys.forEach((k, ki) => {
    const command = apiKeyCommand(pepper, k, { scope: 'global' });
    steps.push({
      path: ['globalKeys', ki], label: `global API key "${k.name}"`, streamId: apiKeyStreamId(command.data.keyId),
      decider: apiKeyDecider, command, companyId: null,
    });
  });
  return steps;
}

/**
 * Ids the API addresses without their owner must not already belong to another owner: contact lists and custom
 * fields (of another company), templates (of another number), provider phone number ids (of another number).
 * Phone numbers and API keys are checked by their deciders (their stream records the owner).
 */
async function checkOwnership(services: Services, f: Fixture): Promise<FixtureIssue[]> {
  const issues: FixtureIssue[] = [];
  const lists: Array<{ id: number; owner: number; path: string }> = [];
  const fields: Array<{ id: number; owner: number; path: string }> = [];
  const templates: Array<{ id: number; owner: number; path: string }> = [];
  const providerIds: Array<{ id: string; owner: number; path: string }> = [];
  f.companies.forEach((c, ci) => {
    c.contactLists.forEach((l, li) => {
      lists.push({ id: l.id, owner: c.id, path: formatPath(['companies', ci, 'contactLists', li, 'id']) });
      l.customFields.forEach((cf, fi) =>
        fields.push({ id: cf.id, owner: c.id, path: formatPath(['companies', ci, 'contactLists', li, 'customFields', fi, 'id']) }));
    });
    c.phoneNumbers.forEach((n, ni) => {
      providerIds.push({ id: n.phoneNumberId, owner: n.id, path: formatPath(['companies', ci, 'phoneNumbers', ni, 'phoneNumberId']) });
      n.templates.forEach((t, ti) =>
        templates.push({ id: t.id, owner: n.id, path: formatPath(['companies', ci, 'phoneNumbers', ni, 'templates', ti, 'id']) }));
    });
  });

  const check = async <K extends string | number>(
    items: Array<{ id: K; owner: number; path: string }>,
    sql: string,
    describe: (id: K, owner: number) => string,
  ) => {
    if (items.length === 0) return;
    const r = await services.pool.query<{ id: K; owner: number }>(sql, [items.map((i) => i.id)]);
    const owners = new Map<K, number[]>();
    for (const row of r.rows) owners.set(row.id, [...(owners.get(row.id) ?? []), row.owner]);
    for (const item of items) {
      const other = (owners.get(item.id) ?? []).find((o) => o !== item.owner);
      if (other !== undefined) issues.push({ path: item.path, message: describe(item.id, other) });
    }
  };
  await check(lists, 'SELECT list_id AS id, company_id AS owner FROM rm_business.contact_lists WHERE list_id = ANY($1)',
    (id, o) => `contact list ${id} already belongs to company ${o}`);
  await check(fields, 'SELECT field_id AS id, company_id AS owner FROM rm_business.custom_fields WHERE field_id = ANY($1)',
    (id, o) => `custom field ${id} already belongs to company ${o}`);
  await check(templates, 'SELECT template_id AS id, number_id AS owner FROM rm_accounts.templates WHERE template_id = ANY($1)',
    (id, o) => `template ${id} already belongs to phone number ${o}`);
  await check(providerIds, 'SELECT phone_number_id AS id, number_id AS owner FROM rm_accounts.numbers WHERE phone_number_id = ANY($1)',
    (id, o) => `phoneNumberId ${JSON.stringify(id)} already belongs to phone number ${o}`);
  return issues;
}
