import type { Projection } from '../projection';
import type { ContactEvent } from '../../events/contacts';
import type { ConversationEvent } from '../../events/conversations';
import type { ProvisioningEvent } from '../../events/provisioning';
import { normalizePhone } from '../../shared/phone';

export const CONTACTS_SCHEMA = 'rm_contacts';

type Handled =
  | ContactEvent
  | Extract<ProvisioningEvent, { type: 'ContactListCreated' | 'ContactListChanged' | 'CustomFieldDefined' | 'CustomFieldChanged' }>
  | Extract<ConversationEvent, { type: 'MessageRecorded' }>;

/**
 * The contacts read model: contacts with their phone index, the company's contact lists and custom-field
 * definitions (its own copy, fed by the provisioning events, so the model is self-contained), each contact's
 * current custom-field versions and their history, and reply statistics from inbound messages (by phone and by
 * contact id) for the lookup's hasReplied / lastReplyAt / session window.
 *
 * Idempotent: creations are INSERT .. ON CONFLICT DO NOTHING, versions only move forward (version / stream
 * revision guards), reply times are GREATEST(...).
 */
export const contactsProjection: Projection = {
  name: 'contacts',
  version: 1,
  schema: CONTACTS_SCHEMA,
  handles: [
    'ContactCreated', 'ContactProfileChanged', 'CustomFieldValueSet', 'CustomFieldValueCleared',
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
  async apply(tx, event) {
    const e = { type: event.type, data: event.data } as Handled;
    switch (e.type) {
      case 'ContactListCreated':
      case 'ContactListChanged': {
        const d = e.data;
        await tx.query(
          `WITH up AS (
             INSERT INTO lists (company_id, list_id, name, is_default) VALUES ($1, $2, $3, $4)
             ON CONFLICT (company_id, list_id) DO UPDATE SET name = EXCLUDED.name, is_default = EXCLUDED.is_default
           )
           UPDATE lists SET is_default = false WHERE $4 AND company_id = $1 AND list_id <> $2 AND is_default`,
          [d.companyId, d.listId, d.name, d.isDefault],
        );
        return;
      }
      case 'CustomFieldDefined':
      case 'CustomFieldChanged': {
        const d = e.data;
        await tx.query(
          `INSERT INTO fields (company_id, field_id, list_id, key, name, field_type, options, required, grp)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
           ON CONFLICT (company_id, field_id) DO UPDATE SET list_id = EXCLUDED.list_id, key = EXCLUDED.key,
             name = EXCLUDED.name, field_type = EXCLUDED.field_type, options = EXCLUDED.options,
             required = EXCLUDED.required, grp = EXCLUDED.grp`,
          [d.companyId, d.fieldId, d.listId, d.key, d.name, d.fieldType, d.options === null ? null : JSON.stringify(d.options), d.required, d.group],
        );
        return;
      }
      case 'ContactCreated': {
        const d = e.data;
        await tx.query(
          `INSERT INTO contacts (company_id, contact_id, list_id, phone, full_name, email, source, source_detail,
                                 profile_picture, is_test, created_at, revision)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT (company_id, contact_id) DO NOTHING`,
          [d.companyId, d.contactId, d.contactListId, d.phone, d.fullName, d.email, d.source, d.sourceDetail,
            d.profilePicture, d.isTest, d.createdAt, event.revision.toString()],
        );
        return;
      }
      case 'ContactProfileChanged': {
        const d = e.data;
        await tx.query(
          `UPDATE contacts SET full_name = $3, email = $4, source = $5, source_detail = $6, profile_picture = $7,
                  is_test = $8, revision = $9
            WHERE company_id = $1 AND contact_id = $2 AND revision < $9`,
          [d.companyId, d.contactId, d.fullName, d.email, d.source, d.sourceDetail, d.profilePicture, d.isTest, event.revision.toString()],
        );
        return;
      }
      case 'CustomFieldValueSet':
      case 'CustomFieldValueCleared': {
        const d = e.data;
        const value = e.type === 'CustomFieldValueSet' ? JSON.stringify(e.data.value) : null;
        const expiresAt = e.type === 'CustomFieldValueSet' ? e.data.expiresAt : null;
        await tx.query(
          `WITH h AS (
             INSERT INTO field_history (company_id, contact_id, field_id, version, value, expires_at, set_at, actor)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING
           )
           INSERT INTO field_values (company_id, contact_id, field_id, version, value, expires_at, set_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7)
           ON CONFLICT (company_id, contact_id, field_id) DO UPDATE
             SET version = EXCLUDED.version, value = EXCLUDED.value, expires_at = EXCLUDED.expires_at, set_at = EXCLUDED.set_at
             WHERE field_values.version < EXCLUDED.version`,
          [d.companyId, d.contactId, d.fieldId, d.version, value, expiresAt, event.metadata.at, event.metadata.actor],
        );
        return;
      }
      case 'MessageRecorded': {
        const d = e.data;
        if (d.direction !== 'inbound') return;
        const phone = d.contactPhone ? normalizePhone(d.contactPhone) : null;
        const contactId = d.author.type === 'contact' ? (d.author.contactId ?? null) : null;
        if (phone === null && contactId === null) return;
        await tx.query(
          `WITH p AS (
             INSERT INTO replies_by_phone (company_id, phone, last_reply_at)
             SELECT $1, $2, $4 WHERE $2::text IS NOT NULL
             ON CONFLICT (company_id, phone) DO UPDATE SET last_reply_at = GREATEST(replies_by_phone.last_reply_at, EXCLUDED.last_reply_at)
           )
           INSERT INTO replies_by_contact (company_id, contact_id, last_reply_at)
           SELECT $1, $3, $4 WHERE $3::integer IS NOT NULL
           ON CONFLICT (company_id, contact_id) DO UPDATE SET last_reply_at = GREATEST(replies_by_contact.last_reply_at, EXCLUDED.last_reply_at)`,
          [d.companyId, phone, contactId, d.occurredAt],
        );
        return;
      }
    }
  },
};
