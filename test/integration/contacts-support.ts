import { randomUUID } from 'node:crypto';
import type { FieldType } from '../../src/commands/contact/model';
import type { EventToAppend, Position } from '../../src/ports/event-store';
import type { Services } from '../../src/services';
import { hashApiKey, keyIdFromHash } from '../../src/shared/api-key';
import { TEST_PEPPER } from '../support/services';

// Provisioning for the contacts suites: appends provisioning events directly (lists, custom fields, keys, messages).

export const KEY_101 = 'sbk_contacts101aaaaaaaaaaaaaaaaaaaaaa';
export const KEY_101_EXPIRED = 'sbk_contacts101expiredxxxxxxxxxxxxx';
export const KEY_101_REVOKED = 'sbk_contacts101revokedxxxxxxxxxxxxx';
export const KEY_202 = 'sbk_contacts202bbbbbbbbbbbbbbbbbbbbbb';
export const KEY_303 = 'sbk_contacts303cccccccccccccccccccccc';
export const KEY_GLOBAL = 'sbk_global_contactsglobalkeyzzzzzzzzzzz';

export interface FieldSpec {
  id: number;
  key: string;
  fieldType: FieldType;
  options?: string[] | null;
  required?: boolean;
  group?: string | null;
  name?: string;
}

export interface ListSpec {
  id: number;
  name: string;
  isDefault: boolean;
  fields: FieldSpec[];
}

const meta = (companyId: number | null, at = '2026-01-01T00:00:00.000Z') => ({
  eventId: randomUUID(), correlationId: randomUUID(), causationId: null, companyId, actor: 'test', at,
});

let lastPosition: Position | undefined;

export async function appendEvents(services: Services, streamId: string, events: Array<{ type: string; data: unknown }>, companyId: number | null) {
  const toAppend: EventToAppend[] = events.map((e) => ({ type: e.type, data: e.data, metadata: meta(companyId) }));
  const r = await services.store.append(streamId, toAppend, 'any');
  lastPosition = r.position;
  return r;
}

/**
 * Waits until every read model applied what this file appended last. (runner.catchUp() alone can return early:
 * its head is read below the oldest open transaction, which the runner's own batches may hold back.)
 */
export async function settle(services: Services): Promise<void> {
  await services.runner.catchUp();
  if (lastPosition) await services.runner.waitFor(lastPosition);
}

export async function provisionLists(services: Services, companyId: number, lists: ListSpec[]): Promise<void> {
  const events: Array<{ type: string; data: unknown }> = [];
  for (const l of lists) {
    events.push({ type: 'ContactListCreated', data: { companyId, listId: l.id, name: l.name, isDefault: l.isDefault } });
    for (const f of l.fields) {
      events.push({
        type: 'CustomFieldDefined',
        data: {
          companyId, listId: l.id, fieldId: f.id, key: f.key, name: f.name ?? f.key, fieldType: f.fieldType,
          options: f.options ?? null, required: f.required ?? false, group: f.group ?? null,
        },
      });
    }
  }
  if (events.length) await appendEvents(services, `company-${companyId}`, events, companyId);
}

export async function issueKey(
  services: Services,
  key: string,
  options: { companyId: number | null; scope?: 'company' | 'global'; expiresAt?: string | null; revoked?: boolean; name?: string },
): Promise<string> {
  const hash = hashApiKey(TEST_PEPPER, key);
  const keyId = keyIdFromHash(hash);
  const events: Array<{ type: string; data: unknown }> = [{
    type: 'ApiKeyIssued',
    data: {
      keyId, scope: options.scope ?? 'company', companyId: options.companyId, userId: null, name: options.name ?? 'test key',
      keyHash: hash, expiresAt: options.expiresAt ?? null,
    },
  }];
  if (options.revoked) events.push({ type: 'ApiKeyRevoked', data: { keyId } });
  await appendEvents(services, `apikey-${keyId}`, events, options.companyId);
  return keyId;
}

/** The lists of the suites: company 101 has every field type; 202 another company; 303 has no default list. */
export const LISTS_101: ListSpec[] = [
  {
    id: 11, name: 'Patients', isDefault: true,
    fields: [
      { id: 501, key: 'plan', name: 'Plan', fieldType: 'selector', options: ['basic', 'gold'] },
      { id: 502, key: 'visits', name: 'Visits', fieldType: 'int' },
      { id: 503, key: 'allergies', name: 'Allergies', fieldType: 'multiselector', options: ['latex', 'penicillin', 'pollen'] },
      { id: 504, key: 'next_visit', name: 'Next visit', fieldType: 'date' },
      { id: 505, key: 'guardian_name', name: 'Guardian', fieldType: 'string', group: 'guardians' },
      { id: 506, key: 'work_email', name: 'Work email', fieldType: 'email' },
      { id: 507, key: 'website', name: 'Website', fieldType: 'url' },
      { id: 508, key: 'last_purchase', name: 'Last purchase', fieldType: 'datetime' },
      { id: 509, key: 'call_time', name: 'Call time', fieldType: 'time' },
      { id: 510, key: 'balance', name: 'Balance', fieldType: 'float' },
      { id: 511, key: 'nickname', name: 'Nickname', fieldType: 'string', required: true },
      { id: 512, key: 'notes', name: 'Notes', fieldType: 'text' },
      { id: 513, key: 'history', name: 'History', fieldType: 'textarea' },
    ],
  },
  { id: 12, name: 'Leads', isDefault: false, fields: [{ id: 521, key: 'score', name: 'Score', fieldType: 'int' }] },
];
export const LISTS_202: ListSpec[] = [
  { id: 21, name: 'Customers', isDefault: true, fields: [{ id: 601, key: 'tier', name: 'Tier', fieldType: 'string' }] },
];
export const LISTS_303: ListSpec[] = [
  { id: 31, name: 'Imported', isDefault: false, fields: [] },
];

export async function provisionAll(services: Services): Promise<void> {
  await provisionLists(services, 101, LISTS_101);
  await provisionLists(services, 202, LISTS_202);
  await provisionLists(services, 303, LISTS_303);
  await issueKey(services, KEY_101, { companyId: 101 });
  await issueKey(services, KEY_101_EXPIRED, { companyId: 101, expiresAt: '2025-01-01T00:00:00Z' });
  await issueKey(services, KEY_101_REVOKED, { companyId: 101, revoked: true });
  await issueKey(services, KEY_202, { companyId: 202 });
  await issueKey(services, KEY_303, { companyId: 303 });
  await issueKey(services, KEY_GLOBAL, { companyId: null, scope: 'global' });
  await settle(services);
}

export async function recordMessage(
  services: Services,
  m: { companyId: number; direction: 'inbound' | 'outbound'; occurredAt: string; contactPhone?: string | null; contactId?: number | null },
): Promise<void> {
  const messageId = randomUUID();
  await appendEvents(services, `conversation-${m.companyId}-c1`, [{
    type: 'MessageRecorded',
    data: {
      companyId: m.companyId, messageId, conversationId: 'c1', occurredAt: m.occurredAt, channel: 'PROVIDER_MSGAPP',
      direction: m.direction,
      author: m.direction === 'inbound' ? { type: 'contact', contactId: m.contactId ?? null } : { type: 'system' },
      contactPhone: m.contactPhone ?? null,
      content: { type: 'text', text: 'hi', mediaUrl: null, mediaMime: null },
      replyToMessageId: null, classifications: [], extractions: [], toolCalls: [], traceId: null,
    },
  }], m.companyId);
}

/** A settable clock for services.now. */
export function testClock(start = '2026-03-01T12:00:00.000Z') {
  let t = Date.parse(start);
  return {
    now: () => new Date(t),
    set(iso: string) {
      t = Date.parse(iso);
    },
    advance(ms: number) {
      t += ms;
    },
  };
}
