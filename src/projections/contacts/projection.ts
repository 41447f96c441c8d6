import type { PoolClient } from 'pg';
import type { Projection } from '../projection';
import type { RecordedEvent } from '../../ports/event-store';
import type { ContactStreamEvent } from '../../events/contacts';
import type { ConversationEvent } from '../../events/conversations';
import type { ProvisioningEvent } from '../../events/provisioning';
import { normalizePhone } from '../../shared/phone';
import { CONTACTS_CHANGED_CHANNEL, markChanging } from '../change-signals';
import { HISTORY_CTES } from './field-history';

export { FIELD_HISTORY_KEPT } from './field-history';

export const CONTACTS_SCHEMA = 'rm_contacts';

type Handled =
  | ContactStreamEvent
  | Extract<ProvisioningEvent, { type: 'ContactListCreated' | 'ContactListChanged' | 'CustomFieldDefined' | 'CustomFieldChanged' }>
  | Extract<ConversationEvent, { type: 'MessageRecorded' }>;

type Of<T extends Handled['type']> = Extract<Handled, { type: T }>;

const CH = CONTACTS_CHANGED_CHANNEL;

/**
 * Change signals for the per-process contact cache (src/http/contact-cache.ts, src/projections/change-signals.ts):
 * every statement that changes what a lookup or get of a number shows returns `k` = `<companyId>:<phone>` (or
 * `<companyId>` for list and field definitions, `claim:<companyId>:<phone>` for a number's claims) and notifies
 * it in the same statement; the keys are marked as changing in this process before the transaction commits.
 */
async function signalled(tx: PoolClient, query: { name?: string; text: string; values: unknown[] }): Promise<void> {
  const r = await tx.query<{ k: string | null }>(query);
  for (const row of r.rows) if (row.k !== null) markChanging(CH, row.k);
}

/**
 * The contacts read model: contacts with their phone index and the phone claims (which contacts hold a number, as
 * the claim streams say), the company's contact lists and custom-field definitions (its own copy, fed by the
 * provisioning events, so the model is self-contained), each contact's current custom-field versions and their
 * recent history (the last FIELD_HISTORY_KEPT versions of each field), and reply statistics from inbound messages
 * (by phone and by contact id) for the lookup's hasReplied / lastReplyAt / session window.
 *
 * `contacts.revision` is the revision of the last event of the contact's stream applied, so a contact row with its
 * field values is the contact's state at that revision: the upsert decides on it and appends with that expected
 * revision (docs/contacts.md).
 *
 * Idempotent: creations are INSERT .. ON CONFLICT DO NOTHING, versions and revisions only move forward, reply
 * times only move forward. `applyBatch` leaves exactly the rows `apply` leaves, with one statement per table.
 */
export const contactsProjection: Projection = {
  name: 'contacts',
  // not bumped for the bounded field history (review 22): a bump rebuilds the model at start, and contact upserts wait
  // for it (503 after 10 s) for the whole replay; an upgraded model is trimmed by `projections rebuild contacts`, online
  // (docs/contacts.md, "Field history")
  version: 2,
  schema: CONTACTS_SCHEMA,
  handles: [
    'ContactCreated', 'ContactProfileChanged', 'CustomFieldValueSet', 'CustomFieldValueCleared', 'ContactPhoneClaimed',
    'ContactListCreated', 'ContactListChanged', 'CustomFieldDefined', 'CustomFieldChanged',
    'MessageRecorded',
  ],
  ddl: `
    CREATE TABLE IF NOT EXISTS lists (
      company_id integer NOT NULL,
      list_id    integer NOT NULL,
      name       text    NOT NULL,
      is_default boolean NOT NULL,
      PRIMARY KEY (company_id, list_id)
    );
    CREATE TABLE IF NOT EXISTS fields (
      company_id integer NOT NULL,
      field_id   integer NOT NULL,
      list_id    integer NOT NULL,
      key        text    NOT NULL,
      name       text    NOT NULL,
      field_type text    NOT NULL,
      options    jsonb,
      required   boolean NOT NULL,
      grp        text,
      PRIMARY KEY (company_id, field_id)
    );
    CREATE INDEX IF NOT EXISTS fields_by_list ON fields (company_id, list_id, field_id);
    CREATE TABLE IF NOT EXISTS contacts (
      company_id      integer     NOT NULL,
      contact_id      integer     NOT NULL,
      list_id         integer     NOT NULL,
      phone           text        NOT NULL,
      full_name       text,
      email           text,
      source          text,
      source_detail   text,
      profile_picture text,
      is_test         boolean     NOT NULL,
      created_at      timestamptz NOT NULL,
      revision        bigint      NOT NULL,
      PRIMARY KEY (company_id, contact_id)
    );
    CREATE INDEX IF NOT EXISTS contacts_by_phone ON contacts (company_id, phone);
    CREATE TABLE IF NOT EXISTS phone_claims (
      company_id integer NOT NULL,
      phone      text    NOT NULL,
      contact_id integer NOT NULL,
      is_test    boolean NOT NULL,
      PRIMARY KEY (company_id, phone, contact_id)
    );
    CREATE TABLE IF NOT EXISTS field_values (
      company_id integer     NOT NULL,
      contact_id integer     NOT NULL,
      field_id   integer     NOT NULL,
      version    integer     NOT NULL,
      value      jsonb,
      expires_at timestamptz,
      set_at     timestamptz NOT NULL,
      PRIMARY KEY (company_id, contact_id, field_id)
    );
    -- the last FIELD_HISTORY_KEPT versions of each field (since review 22; every version before)
    CREATE TABLE IF NOT EXISTS field_history (
      company_id integer     NOT NULL,
      contact_id integer     NOT NULL,
      field_id   integer     NOT NULL,
      version    integer     NOT NULL,
      value      jsonb,
      expires_at timestamptz,
      set_at     timestamptz NOT NULL,
      actor      text        NOT NULL,
      PRIMARY KEY (company_id, contact_id, field_id, version)
    );
    CREATE TABLE IF NOT EXISTS replies_by_phone (
      company_id    integer     NOT NULL,
      phone         text        NOT NULL,
      last_reply_at timestamptz NOT NULL,
      PRIMARY KEY (company_id, phone)
    );
    CREATE TABLE IF NOT EXISTS replies_by_contact (
      company_id    integer     NOT NULL,
      contact_id    integer     NOT NULL,
      last_reply_at timestamptz NOT NULL,
      PRIMARY KEY (company_id, contact_id)
    );`,

  apply: applyOne,

  /** Outbound messages (and inbound ones naming neither a number nor a contact) change nothing here. */
  affects(event) {
    return event.type !== 'MessageRecorded' || replyOf((event.data as Of<'MessageRecorded'>['data'])) !== null;
  },

  /**
   * The same rows as `apply` one event at a time, with one statement per table for the whole batch: list and field
   * definitions (rare: provisioning) are applied one by one; claims, contacts, field versions and reply times each
   * in one multi-row statement. Each table is written by events of one kind only, so applying kind by kind (each in
   * log order) is applying in log order. Several events of one row are first folded into one row the way the
   * statements of `apply` would leave it (the last profile, the highest revision, version and reply time).
   */
  async applyBatch(tx, events) {
    const claims = new Map<string, Of<'ContactPhoneClaimed'>['data']>();
    const created = new Map<string, { d: Of<'ContactCreated'>['data']; revision: bigint }>();
    const later = new Map<string, { companyId: number; contactId: number; maxRev: bigint; profile?: { d: Of<'ContactProfileChanged'>['data']; revision: bigint } }>();
    const versions: Array<{ e: Of<'CustomFieldValueSet'> | Of<'CustomFieldValueCleared'>; at: string; actor: string }> = [];
    const byPhone = new Map<string, { companyId: number; phone: string; at: string }>();
    const byContact = new Map<string, { companyId: number; contactId: number; at: string }>();

    const latest = <K>(map: Map<string, K & { at: string }>, key: string, value: K & { at: string }) => {
      const had = map.get(key);
      if (!had || Date.parse(value.at) > Date.parse(had.at)) map.set(key, value);
    };
    const laterOf = (companyId: number, contactId: number, revision: bigint) => {
      const key = `${companyId}:${contactId}`;
      let l = later.get(key);
      if (!l) later.set(key, (l = { companyId, contactId, maxRev: revision }));
      if (revision > l.maxRev) l.maxRev = revision;
      return l;
    };

    for (const event of events) {
      const e = { type: event.type, data: event.data } as Handled;
      switch (e.type) {
        case 'ContactListCreated':
        case 'ContactListChanged':
        case 'CustomFieldDefined':
        case 'CustomFieldChanged':
          await applyOne(tx, event);
          break;
        case 'ContactPhoneClaimed':
          claims.set(`${e.data.companyId}:${e.data.phone}:${e.data.contactId}`, e.data);
          break;
        case 'ContactCreated': {
          const key = `${e.data.companyId}:${e.data.contactId}`;
          if (!created.has(key)) created.set(key, { d: e.data, revision: event.revision });
          break;
        }
        case 'ContactProfileChanged': {
          const l = laterOf(e.data.companyId, e.data.contactId, event.revision);
          if (!l.profile || event.revision > l.profile.revision) l.profile = { d: e.data, revision: event.revision };
          break;
        }
        case 'CustomFieldValueSet':
        case 'CustomFieldValueCleared':
          laterOf(e.data.companyId, e.data.contactId, event.revision);
          versions.push({ e, at: event.metadata.at, actor: event.metadata.actor });
          break;
        case 'MessageRecorded': {
          const r = replyOf(e.data);
          if (!r) break;
          if (r.phone !== null) latest(byPhone, `${r.companyId}:${r.phone}`, { companyId: r.companyId, phone: r.phone, at: r.at });
          if (r.contactId !== null) latest(byContact, `${r.companyId}:${r.contactId}`, { companyId: r.companyId, contactId: r.contactId, at: r.at });
          break;
        }
      }
    }

    if (claims.size + created.size + later.size + versions.length + byPhone.size + byContact.size === 0) return;
    // A contact created in this batch is inserted as the batch leaves it (its last profile, its last revision):
    // the UPDATE of the same statement does not see that row. A contact that existed already (or whose creation is
    // redelivered) is updated: its profile when the batch's last profile change is newer than the row.
    const cl = [...claims.values()];
    const ins = [...created.entries()].map(([key, { d, revision }]) => {
      const l = later.get(key);
      const p = l?.profile && l.profile.revision > revision ? l.profile.d : d;
      const rev = l && l.maxRev > revision ? l.maxRev : revision;
      return { d, p, rev };
    });
    const upd = [...later.values()];
    const value = (v: (typeof versions)[number]) => (v.e.type === 'CustomFieldValueSet' ? JSON.stringify(v.e.data.value) : null);
    const expires = (v: (typeof versions)[number]) => (v.e.type === 'CustomFieldValueSet' ? v.e.data.expiresAt : null);
    const rp = [...byPhone.values()];
    const rc = [...byContact.values()];
    await signalled(tx, {
      name: 'rm_contacts_batch',
      text: BATCH_SQL,
      values: [
        cl.map((x) => x.companyId), cl.map((x) => x.phone), cl.map((x) => x.contactId), cl.map((x) => x.isTest),
        ins.map((x) => x.d.companyId), ins.map((x) => x.d.contactId), ins.map((x) => x.d.contactListId), ins.map((x) => x.d.phone),
        ins.map((x) => x.p.fullName), ins.map((x) => x.p.email), ins.map((x) => x.p.source), ins.map((x) => x.p.sourceDetail),
        ins.map((x) => x.p.profilePicture), ins.map((x) => x.p.isTest), ins.map((x) => x.d.createdAt), ins.map((x) => x.rev.toString()),
        upd.map((x) => x.companyId), upd.map((x) => x.contactId), upd.map((x) => (x.profile ? x.profile.revision.toString() : '-1')),
        upd.map((x) => x.maxRev.toString()), upd.map((x) => x.profile?.d.fullName ?? null), upd.map((x) => x.profile?.d.email ?? null),
        upd.map((x) => x.profile?.d.source ?? null), upd.map((x) => x.profile?.d.sourceDetail ?? null),
        upd.map((x) => x.profile?.d.profilePicture ?? null), upd.map((x) => x.profile?.d.isTest ?? false),
        versions.map((v) => v.e.data.companyId), versions.map((v) => v.e.data.contactId), versions.map((v) => v.e.data.fieldId),
        versions.map((v) => v.e.data.version), versions.map(value), versions.map(expires), versions.map((v) => v.at), versions.map((v) => v.actor),
        rp.map((x) => x.companyId), rp.map((x) => x.phone), rp.map((x) => x.at), rc.map((x) => x.companyId), rc.map((x) => x.contactId), rc.map((x) => x.at),
      ],
    });
  },
};

/**
 * The number of the contact a reply names (null when the read model has no such contact), looked up by primary key
 * per reply: a join would let the planner scan every contact when its statistics are stale.
 */
const PHONE_OF = (alias: string) =>
  `(SELECT ct.phone FROM contacts ct WHERE ct.company_id = ${alias}.company_id AND ct.contact_id = ${alias}.contact_id)`;

/**
 * Whether the number of a new claim was claimed already (by another contact): only then can a process remember a
 * holder of it (the upsert memory), so only then is the claim signalled. A first claim is not.
 */
const OTHER_CLAIM = (alias: string) =>
  `EXISTS (SELECT 1 FROM phone_claims o WHERE o.company_id = ${alias}.company_id AND o.phone = ${alias}.phone AND o.contact_id <> ${alias}.contact_id)`;

/**
 * The whole batch in one statement (tables are independent: each is written by one part): claims ($1-$4),
 * contacts created ($5-$16) and changed ($17-$26), custom-field versions ($27-$34), reply times by number
 * ($35-$37) and by contact ($38-$40). Returns (and notifies) the change signal of every changed number.
 */
const BATCH_SQL = `
  WITH cl AS (
    INSERT INTO phone_claims (company_id, phone, contact_id, is_test)
    SELECT * FROM unnest($1::integer[], $2::text[], $3::integer[], $4::boolean[])
    ON CONFLICT DO NOTHING
    RETURNING company_id, phone, contact_id
  ), ins AS (
    INSERT INTO contacts (company_id, contact_id, list_id, phone, full_name, email, source, source_detail,
                          profile_picture, is_test, created_at, revision)
    SELECT * FROM unnest($5::integer[], $6::integer[], $7::integer[], $8::text[], $9::text[], $10::text[], $11::text[],
                         $12::text[], $13::text[], $14::boolean[], $15::timestamptz[], $16::bigint[])
    ON CONFLICT (company_id, contact_id) DO NOTHING
    RETURNING company_id, phone
  ), upd AS (
    UPDATE contacts c SET
      full_name       = CASE WHEN v.p_rev > c.revision THEN v.full_name ELSE c.full_name END,
      email           = CASE WHEN v.p_rev > c.revision THEN v.email ELSE c.email END,
      source          = CASE WHEN v.p_rev > c.revision THEN v.source ELSE c.source END,
      source_detail   = CASE WHEN v.p_rev > c.revision THEN v.source_detail ELSE c.source_detail END,
      profile_picture = CASE WHEN v.p_rev > c.revision THEN v.profile_picture ELSE c.profile_picture END,
      is_test         = CASE WHEN v.p_rev > c.revision THEN v.is_test ELSE c.is_test END,
      revision        = v.max_rev
      FROM unnest($17::integer[], $18::integer[], $19::bigint[], $20::bigint[], $21::text[], $22::text[], $23::text[],
                  $24::text[], $25::text[], $26::boolean[])
           AS v(company_id, contact_id, p_rev, max_rev, full_name, email, source, source_detail, profile_picture, is_test)
     WHERE c.company_id = v.company_id AND c.contact_id = v.contact_id AND c.revision < v.max_rev
       -- index lookups whatever the statistics say (a hash join would scan every contact)
       AND c.company_id = ANY($17::integer[]) AND c.contact_id = ANY($18::integer[])
    RETURNING c.company_id, c.phone
  ), e AS (
    SELECT * FROM unnest($27::integer[], $28::integer[], $29::integer[], $30::integer[], $31::jsonb[], $32::timestamptz[],
                         $33::timestamptz[], $34::text[])
             AS e(company_id, contact_id, field_id, version, value, expires_at, set_at, actor)
  )${HISTORY_CTES('$27::integer[]', '$28::integer[]')}, fv AS (
    INSERT INTO field_values (company_id, contact_id, field_id, version, value, expires_at, set_at)
    SELECT DISTINCT ON (company_id, contact_id, field_id) company_id, contact_id, field_id, version, value, expires_at, set_at
      FROM e ORDER BY company_id, contact_id, field_id, version DESC
    ON CONFLICT (company_id, contact_id, field_id) DO UPDATE
      SET version = EXCLUDED.version, value = EXCLUDED.value, expires_at = EXCLUDED.expires_at, set_at = EXCLUDED.set_at
      WHERE field_values.version < EXCLUDED.version
  ), rp AS (
    INSERT INTO replies_by_phone (company_id, phone, last_reply_at)
    SELECT * FROM unnest($35::integer[], $36::text[], $37::timestamptz[])
    ON CONFLICT (company_id, phone) DO UPDATE SET last_reply_at = EXCLUDED.last_reply_at
      WHERE replies_by_phone.last_reply_at < EXCLUDED.last_reply_at
    RETURNING company_id, phone
  ), rc AS (
    INSERT INTO replies_by_contact (company_id, contact_id, last_reply_at)
    SELECT * FROM unnest($38::integer[], $39::integer[], $40::timestamptz[])
    ON CONFLICT (company_id, contact_id) DO UPDATE SET last_reply_at = EXCLUDED.last_reply_at
      WHERE replies_by_contact.last_reply_at < EXCLUDED.last_reply_at
    RETURNING company_id, contact_id
  )
  SELECT k, pg_notify('${CH}', k) FROM (
    SELECT 'claim:' || cl.company_id || ':' || cl.phone AS k FROM cl WHERE ${OTHER_CLAIM('cl')}
    UNION SELECT company_id || ':' || phone FROM ins
    UNION SELECT company_id || ':' || phone FROM upd
    UNION SELECT company_id || ':' || phone FROM rp
    UNION SELECT rc.company_id || ':' || ${PHONE_OF('rc')} FROM rc
  ) x WHERE k IS NOT NULL`;

/** Reply times: only move forward; notifies the number (and the number of the contact a reply names). */
const REPLIES_CTE = (phones: string, contacts: string) => `
  WITH p AS (
    INSERT INTO replies_by_phone (company_id, phone, last_reply_at) ${phones}
    ON CONFLICT (company_id, phone) DO UPDATE SET last_reply_at = EXCLUDED.last_reply_at
      WHERE replies_by_phone.last_reply_at < EXCLUDED.last_reply_at
    RETURNING company_id, phone
  ), c AS (
    INSERT INTO replies_by_contact (company_id, contact_id, last_reply_at) ${contacts}
    ON CONFLICT (company_id, contact_id) DO UPDATE SET last_reply_at = EXCLUDED.last_reply_at
      WHERE replies_by_contact.last_reply_at < EXCLUDED.last_reply_at
    RETURNING company_id, contact_id
  )
  SELECT k, pg_notify('${CH}', k) FROM (
    SELECT company_id || ':' || phone AS k FROM p
    UNION SELECT c.company_id || ':' || ${PHONE_OF('c')} FROM c
  ) x WHERE k IS NOT NULL`;

/** What an inbound message counts for: its number (normalized) and the contact id it was sent under. */
function replyOf(d: Of<'MessageRecorded'>['data']): { companyId: number; phone: string | null; contactId: number | null; at: string } | null {
  if (d.direction !== 'inbound') return null;
  const phone = d.contactPhone ? normalizePhone(d.contactPhone) : null;
  const contactId = d.author.type === 'contact' ? (d.author.contactId ?? null) : null;
  if (phone === null && contactId === null) return null;
  return { companyId: d.companyId, phone, contactId, at: d.occurredAt };
}

/** One event, one statement. */
async function applyOne(tx: PoolClient, event: RecordedEvent): Promise<void> {
  const e = { type: event.type, data: event.data } as Handled;
  switch (e.type) {
    case 'ContactListCreated':
    case 'ContactListChanged': {
      const d = e.data;
      await signalled(tx, {
        text: `WITH up AS (
                 INSERT INTO lists (company_id, list_id, name, is_default) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (company_id, list_id) DO UPDATE SET name = EXCLUDED.name, is_default = EXCLUDED.is_default
               ), other AS (
                 UPDATE lists SET is_default = false WHERE $4 AND company_id = $1 AND list_id <> $2 AND is_default
               )
               SELECT $1::text AS k, pg_notify('${CH}', $1::text)`,
        values: [d.companyId, d.listId, d.name, d.isDefault],
      });
      return;
    }
    case 'CustomFieldDefined':
    case 'CustomFieldChanged': {
      const d = e.data;
      await signalled(tx, {
        text: `INSERT INTO fields (company_id, field_id, list_id, key, name, field_type, options, required, grp)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
               ON CONFLICT (company_id, field_id) DO UPDATE SET list_id = EXCLUDED.list_id, key = EXCLUDED.key,
                 name = EXCLUDED.name, field_type = EXCLUDED.field_type, options = EXCLUDED.options,
                 required = EXCLUDED.required, grp = EXCLUDED.grp
               RETURNING company_id::text AS k, pg_notify('${CH}', company_id::text)`,
        values: [d.companyId, d.fieldId, d.listId, d.key, d.name, d.fieldType, d.options === null ? null : JSON.stringify(d.options), d.required, d.group],
      });
      return;
    }
    case 'ContactPhoneClaimed': {
      const d = e.data;
      await signalled(tx, {
        text: `WITH c AS (
                 INSERT INTO phone_claims (company_id, phone, contact_id, is_test) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING
                 RETURNING company_id, phone, contact_id
               )
               SELECT k, pg_notify('${CH}', k) FROM (SELECT 'claim:' || c.company_id || ':' || c.phone AS k FROM c WHERE ${OTHER_CLAIM('c')}) x`,
        values: [d.companyId, d.phone, d.contactId, d.isTest],
      });
      return;
    }
    case 'ContactCreated': {
      const d = e.data;
      await signalled(tx, {
        text: `INSERT INTO contacts (company_id, contact_id, list_id, phone, full_name, email, source, source_detail,
                                     profile_picture, is_test, created_at, revision)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT (company_id, contact_id) DO NOTHING
               RETURNING company_id || ':' || phone AS k, pg_notify('${CH}', company_id || ':' || phone)`,
        values: [d.companyId, d.contactId, d.contactListId, d.phone, d.fullName, d.email, d.source, d.sourceDetail,
          d.profilePicture, d.isTest, d.createdAt, event.revision.toString()],
      });
      return;
    }
    case 'ContactProfileChanged': {
      const d = e.data;
      await signalled(tx, {
        text: `UPDATE contacts SET full_name = $3, email = $4, source = $5, source_detail = $6, profile_picture = $7,
                      is_test = $8, revision = $9
                WHERE company_id = $1 AND contact_id = $2 AND revision < $9
               RETURNING company_id || ':' || phone AS k, pg_notify('${CH}', company_id || ':' || phone)`,
        values: [d.companyId, d.contactId, d.fullName, d.email, d.source, d.sourceDetail, d.profilePicture, d.isTest, event.revision.toString()],
      });
      return;
    }
    case 'CustomFieldValueSet':
    case 'CustomFieldValueCleared': {
      const d = e.data;
      const value = e.type === 'CustomFieldValueSet' ? JSON.stringify(e.data.value) : null;
      const expiresAt = e.type === 'CustomFieldValueSet' ? e.data.expiresAt : null;
      await signalled(tx, {
        text: `WITH e AS (
                 SELECT $1::integer AS company_id, $2::integer AS contact_id, $3::integer AS field_id, $4::integer AS version,
                        $5::jsonb AS value, $6::timestamptz AS expires_at, $7::timestamptz AS set_at, $8::text AS actor
               )${HISTORY_CTES('ARRAY[$1::integer]', 'ARRAY[$2::integer]')}, v AS (
                 INSERT INTO field_values (company_id, contact_id, field_id, version, value, expires_at, set_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (company_id, contact_id, field_id) DO UPDATE
                   SET version = EXCLUDED.version, value = EXCLUDED.value, expires_at = EXCLUDED.expires_at, set_at = EXCLUDED.set_at
                   WHERE field_values.version < EXCLUDED.version
               )
               UPDATE contacts SET revision = $9 WHERE company_id = $1 AND contact_id = $2 AND revision < $9
               RETURNING company_id || ':' || phone AS k, pg_notify('${CH}', company_id || ':' || phone)`,
        values: [d.companyId, d.contactId, d.fieldId, d.version, value, expiresAt, event.metadata.at, event.metadata.actor, event.revision.toString()],
      });
      return;
    }
    case 'MessageRecorded': {
      const r = replyOf(e.data);
      if (!r) return;
      await signalled(tx, {
        text: REPLIES_CTE(`SELECT $1::integer, $2::text, $4::timestamptz WHERE $2::text IS NOT NULL`, `SELECT $1::integer, $3::integer, $4::timestamptz WHERE $3::integer IS NOT NULL`),
        values: [r.companyId, r.phone, r.contactId, r.at],
      });
      return;
    }
  }
}
