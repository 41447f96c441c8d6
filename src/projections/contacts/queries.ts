import type { Pool } from 'pg';
import type { ContactSource } from '../../events/contacts';
import type { ContactListInfo, ContactProfile, FieldDef, FieldScalar, FieldType, FieldVersion } from '../../events/contacts';
import { phoneVariants } from '../../shared/phone';
import { CONTACTS_SCHEMA as S } from './projection';

// Query functions of the contacts read model (qualified live names; named statements: they are hot paths).

const FIELD_DEFS_JSON = `
  SELECT COALESCE(json_agg(json_build_object(
           'id', f.field_id, 'listId', f.list_id, 'key', f.key, 'name', f.name, 'fieldType', f.field_type,
           'options', f.options, 'required', f.required, 'group', f.grp) ORDER BY f.field_id), '[]'::json)
    FROM ${S}.fields f WHERE f.company_id = l.company_id AND f.list_id = l.list_id`;

/**
 * A contact list of the company with its custom-field definitions; `listId` null: the company's default list.
 * Undefined when there is no such list (or no default).
 */
export async function loadContactList(db: Pool, companyId: number, listId: number | null): Promise<ContactListInfo | null> {
  const r = await db.query<{ list_id: number; name: string; is_default: boolean; fields: FieldDef[] }>({
    name: 'contacts_load_list',
    text: `SELECT l.list_id, l.name, l.is_default, (${FIELD_DEFS_JSON}) AS fields
             FROM ${S}.lists l
            WHERE l.company_id = $1 AND (CASE WHEN $2::integer IS NULL THEN l.is_default ELSE l.list_id = $2::integer END)
            ORDER BY l.list_id LIMIT 1`,
    values: [companyId, listId],
  });
  const row = r.rows[0];
  return row ? { id: row.list_id, name: row.name, isDefault: row.is_default, fields: row.fields } : null;
}

/** A contact's state as the read model holds it, at the revision of the last event of its stream applied. */
export interface ContactAtRevision {
  companyId: number;
  contactId: number;
  contactListId: number;
  phone: string;
  profile: ContactProfile;
  createdAt: string;
  fields: Map<number, FieldVersion>;
  revision: bigint;
}

export interface UpsertSnapshot {
  /** the number's claims (canonical E.164), as the claim stream had them when the read model last applied it */
  claims: Array<{ contactId: number; isTest: boolean }>;
  /** the non-test claimants the read model has a contact row for */
  contacts: ContactAtRevision[];
  /** the requested list (`listId`), or the default one when `listId` is null; null when there is none */
  requested: ContactListInfo | null;
  /** the lists of `contacts`, by id */
  lists: Map<number, ContactListInfo>;
}

/**
 * Everything an upsert of `e164` decides on, in one statement (one snapshot of the read model): the number's
 * claims, the state and revision of the contacts holding it, the requested (or default) list and their lists with
 * their custom fields. The read model may lag the event log: the upsert appends with the revision read here, so a
 * stale state fails the append and the upsert falls back to the streams (src/commands/contact/handler.ts).
 */
export async function loadUpsertSnapshot(db: Pool, companyId: number, e164: string, listId: number | null): Promise<UpsertSnapshot> {
  const r = await db.query<{
    claims: Array<{ id: number; test: boolean }>;
    contacts: Array<{
      id: number; list: number; phone: string; full_name: string | null; email: string | null; source: ContactSource | null;
      source_detail: string | null; profile_picture: string | null; is_test: boolean; created_at: string; rev: string;
      vals: Array<{ f: number; v: number; val: FieldScalar[] | null; e: string | null }>;
    }>;
    lists: Array<{ id: number; name: string; isDefault: boolean; fields: FieldDef[] }>;
  }>({
    name: 'contacts_upsert_snapshot',
    text: `WITH cl AS (
             SELECT contact_id, is_test FROM ${S}.phone_claims WHERE company_id = $1 AND phone = $2
           ), hc AS (
             -- one primary-key lookup per claim, whatever the statistics say (OFFSET 0 keeps the subquery apart)
             SELECT c.* FROM cl CROSS JOIN LATERAL (
               SELECT * FROM ${S}.contacts c WHERE c.company_id = $1 AND c.contact_id = cl.contact_id OFFSET 0
             ) c WHERE NOT cl.is_test
           )
           SELECT
             (SELECT COALESCE(json_agg(json_build_object('id', contact_id, 'test', is_test) ORDER BY contact_id), '[]'::json) FROM cl) AS claims,
             (SELECT COALESCE(json_agg(json_build_object(
                       'id', hc.contact_id, 'list', hc.list_id, 'phone', hc.phone, 'full_name', hc.full_name, 'email', hc.email,
                       'source', hc.source, 'source_detail', hc.source_detail, 'profile_picture', hc.profile_picture,
                       'is_test', hc.is_test, 'created_at', hc.created_at, 'rev', hc.revision::text,
                       'vals', (SELECT COALESCE(json_agg(json_build_object('f', v.field_id, 'v', v.version, 'val', v.value, 'e', v.expires_at)), '[]'::json)
                                  FROM ${S}.field_values v WHERE v.company_id = hc.company_id AND v.contact_id = hc.contact_id)
                     ) ORDER BY hc.contact_id), '[]'::json) FROM hc) AS contacts,
             (SELECT COALESCE(json_agg(json_build_object('id', l.list_id, 'name', l.name, 'isDefault', l.is_default, 'fields', (${FIELD_DEFS_JSON}))
                       ORDER BY l.list_id), '[]'::json)
                FROM ${S}.lists l
               WHERE l.company_id = $1
                 AND (l.list_id IN (SELECT list_id FROM hc) OR l.list_id = $3::integer OR ($3::integer IS NULL AND l.is_default))) AS lists`,
    values: [companyId, e164, listId],
  });
  const row = r.rows[0];
  const lists = new Map(row.lists.map((l) => [l.id, { id: l.id, name: l.name, isDefault: l.isDefault, fields: l.fields }]));
  const requested = listId === null ? (row.lists.find((l) => l.isDefault) ?? null) : (row.lists.find((l) => l.id === listId) ?? null);
  return {
    claims: row.claims.map((c) => ({ contactId: c.id, isTest: c.test })),
    contacts: row.contacts.map((c) => ({
      companyId,
      contactId: c.id,
      contactListId: c.list,
      phone: c.phone,
      profile: {
        fullName: c.full_name, email: c.email, source: c.source, sourceDetail: c.source_detail, profilePicture: c.profile_picture, isTest: c.is_test,
      },
      createdAt: new Date(c.created_at).toISOString(),
      fields: new Map(c.vals.map((v) => [v.f, { version: v.v, value: v.val, expiresAt: v.e === null ? null : new Date(v.e).toISOString() }])),
      revision: BigInt(c.rev),
    })),
    requested: requested && lists.get(requested.id)!,
    lists,
  };
}

export interface LookupContactRow {
  id: number;
  fullName: string | null;
  phone: string;
  email: string | null;
  contactListId: number;
  contactListName: string;
  source: ContactSource | null;
  createdAt: Date;
  isTest: boolean;
}

export interface LookupResult {
  contact: LookupContactRow | null;
  /** latest inbound message of the number (any variant) or of any company contact holding it */
  lastReplyAt: Date | null;
}

/**
 * The contact-lookup read: a contact of the company with this number in any of its lists. When several hold it
 * (different lists), the choice is deterministic: non-test before test, then the oldest, then the lowest id.
 */
export async function lookupContact(db: Pool, companyId: number, e164: string): Promise<LookupResult> {
  const variants = phoneVariants(e164);
  const r = await db.query<{
    contact_id: number; full_name: string | null; phone: string; email: string | null; list_id: number;
    list_name: string | null; source: ContactSource | null; created_at: Date; is_test: boolean; last_reply_at: Date | null;
  }>({
    name: 'contacts_lookup',
    text: `WITH m AS (
             SELECT c.* FROM ${S}.contacts c WHERE c.company_id = $1 AND c.phone = ANY($2::text[])
           )
           SELECT m.contact_id, m.full_name, m.phone, m.email, m.list_id, l.name AS list_name, m.source, m.created_at, m.is_test,
                  GREATEST(
                    (SELECT max(p.last_reply_at) FROM ${S}.replies_by_phone p WHERE p.company_id = $1 AND p.phone = ANY($2::text[])),
                    (SELECT max(r.last_reply_at) FROM ${S}.replies_by_contact r
                      WHERE r.company_id = $1 AND r.contact_id = ANY(ARRAY(SELECT contact_id FROM m)))
                  ) AS last_reply_at
             FROM m LEFT JOIN ${S}.lists l ON l.company_id = m.company_id AND l.list_id = m.list_id
            ORDER BY m.is_test, m.created_at, m.contact_id
            LIMIT 1`,
    values: [companyId, variants],
  });
  const row = r.rows[0];
  if (!row) return { contact: null, lastReplyAt: null };
  return {
    contact: {
      id: row.contact_id,
      fullName: row.full_name,
      phone: row.phone,
      email: row.email,
      contactListId: row.list_id,
      contactListName: row.list_name ?? '',
      source: row.source,
      createdAt: row.created_at,
      isTest: row.is_test,
    },
    lastReplyAt: row.last_reply_at,
  };
}

export interface ExternalContactRow {
  id: number;
  fullName: string | null;
  email: string | null;
  phone: string;
  source: ContactSource | null;
  sourceDetail: string | null;
  profilePicture: string | null;
  contactListId: number;
  createdAt: Date;
  /** every custom field of the contact's list */
  fields: FieldDef[];
  /** latest version per field id */
  values: Map<number, FieldVersion>;
}

/**
 * Non-test contacts of the company holding this number (any variant), each with its list's custom fields and its
 * latest versions. At most `limit` rows (the external get asks for 2: more than one is a 409).
 */
export async function findExternalContacts(db: Pool, companyId: number, e164: string, limit = 2): Promise<ExternalContactRow[]> {
  const r = await db.query<{
    contact_id: number; full_name: string | null; email: string | null; phone: string; source: ContactSource | null;
    source_detail: string | null; profile_picture: string | null; list_id: number; created_at: Date; fields: FieldDef[];
    vals: Array<{ f: number; v: number; val: FieldScalar[] | null; e: string | null }>;
  }>({
    name: 'contacts_external',
    text: `SELECT c.contact_id, c.full_name, c.email, c.phone, c.source, c.source_detail, c.profile_picture, c.list_id, c.created_at,
                  (SELECT COALESCE(json_agg(json_build_object(
                          'id', f.field_id, 'listId', f.list_id, 'key', f.key, 'name', f.name, 'fieldType', f.field_type,
                          'options', f.options, 'required', f.required, 'group', f.grp) ORDER BY f.field_id), '[]'::json)
                     FROM ${S}.fields f WHERE f.company_id = c.company_id AND f.list_id = c.list_id) AS fields,
                  (SELECT COALESCE(json_agg(json_build_object('f', v.field_id, 'v', v.version, 'val', v.value, 'e', v.expires_at)), '[]'::json)
                     FROM ${S}.field_values v WHERE v.company_id = c.company_id AND v.contact_id = c.contact_id) AS vals
             FROM ${S}.contacts c
            WHERE c.company_id = $1 AND c.phone = ANY($2::text[]) AND NOT c.is_test
            ORDER BY c.created_at, c.contact_id
            LIMIT $3`,
    values: [companyId, phoneVariants(e164), limit],
  });
  return r.rows.map((row) => ({
    id: row.contact_id,
    fullName: row.full_name,
    email: row.email,
    phone: row.phone,
    source: row.source,
    sourceDetail: row.source_detail,
    profilePicture: row.profile_picture,
    contactListId: row.list_id,
    createdAt: row.created_at,
    fields: row.fields,
    values: new Map(
      row.vals.map((v) => [v.f, { version: v.v, value: v.val, expiresAt: v.e === null ? null : new Date(v.e).toISOString() }]),
    ),
  }));
}

/**
 * For the sends feature: the company's contacts (test ones included) holding this number in any variant, oldest
 * first. `e164` should be normalized (normalizePhone); its variants are matched.
 */
export async function findContactsByPhone(
  db: Pool,
  companyId: number,
  e164: string,
): Promise<Array<{ id: number; fullName: string | null; phone: string; isTest: boolean }>> {
  const r = await db.query<{ contact_id: number; full_name: string | null; phone: string; is_test: boolean }>({
    name: 'contacts_by_phone',
    text: `SELECT contact_id, full_name, phone, is_test FROM ${S}.contacts
            WHERE company_id = $1 AND phone = ANY($2::text[]) ORDER BY created_at, contact_id`,
    values: [companyId, phoneVariants(e164)],
  });
  return r.rows.map((row) => ({ id: row.contact_id, fullName: row.full_name, phone: row.phone, isTest: row.is_test }));
}

/** findContactsByPhone for many (company, E.164) pairs in one query: each pair's matches under `${companyId}:${e164}`. */
export async function findContactsByPhones(
  db: Pool,
  recipients: ReadonlyArray<{ companyId: number; e164: string }>,
): Promise<Map<string, Array<{ id: number; fullName: string | null; phone: string; isTest: boolean }>>> {
  const companies: number[] = [];
  const variants: string[] = [];
  const keys: string[] = [];
  for (const key of new Set(recipients.map((r) => `${r.companyId}:${r.e164}`))) {
    const [companyId, e164] = [Number(key.slice(0, key.indexOf(':'))), key.slice(key.indexOf(':') + 1)];
    for (const v of phoneVariants(e164)) {
      companies.push(companyId);
      variants.push(v);
      keys.push(key);
    }
  }
  const found = new Map<string, Array<{ id: number; fullName: string | null; phone: string; isTest: boolean }>>();
  if (keys.length === 0) return found;
  const r = await db.query<{ k: string; contact_id: number; full_name: string | null; phone: string; is_test: boolean }>({
    name: 'contacts_by_phones',
    text: `SELECT q.k, c.contact_id, c.full_name, c.phone, c.is_test
             FROM unnest($1::int[], $2::text[], $3::text[]) AS q(company_id, phone, k)
             JOIN ${S}.contacts c ON c.company_id = q.company_id AND c.phone = q.phone
            ORDER BY c.created_at, c.contact_id`,
    values: [companies, variants, keys],
  });
  for (const row of r.rows) {
    const list = found.get(row.k) ?? [];
    list.push({ id: row.contact_id, fullName: row.full_name, phone: row.phone, isTest: row.is_test });
    found.set(row.k, list);
  }
  return found;
}

export interface FieldHistoryEntry {
  fieldId: number;
  version: number;
  /** null: the version cleared the value */
  value: FieldScalar[] | null;
  expiresAt: string | null;
  at: string;
  actor: string;
}

/**
 * The versions of a contact's custom fields the read model keeps, oldest first: the last FIELD_HISTORY_KEPT (10) of each
 * field (src/projections/contacts/field-history.ts); every version is in the event log. No route reads it.
 */
export async function getFieldHistory(db: Pool, companyId: number, contactId: number, fieldId?: number): Promise<FieldHistoryEntry[]> {
  const r = await db.query<{ field_id: number; version: number; value: FieldScalar[] | null; expires_at: Date | null; set_at: Date; actor: string }>(
    `SELECT field_id, version, value, expires_at, set_at, actor FROM ${S}.field_history
      WHERE company_id = $1 AND contact_id = $2 AND ($3::integer IS NULL OR field_id = $3)
      ORDER BY field_id, version`,
    [companyId, contactId, fieldId ?? null],
  );
  return r.rows.map((row) => ({
    fieldId: row.field_id,
    version: row.version,
    value: row.value,
    expiresAt: row.expires_at?.toISOString() ?? null,
    at: row.set_at.toISOString(),
    actor: row.actor,
  }));
}

export type { FieldType };
