import type { Projection } from '../projection';
import type { CompanyEvent } from '../../events/provisioning';
import { BUSINESS_CHANGED_CHANNEL, markChanging } from '../change-signals';

// Read model `business`: company profile, users, branches with their schedules, holidays, agents, operators,
// contact lists and custom fields. Fed by the `company-{id}` stream. Times (`created_at`, `updated_at`) are
// the `at` of the events that created / last changed the row, so a replay reproduces them. Changes to what the
// business endpoints show (company, branches, holidays) are signalled to their read caches (change-signals.ts).

const SCHEMA = 'rm_business';

/** Events changing what the business endpoints show (and cache). */
const CACHED: ReadonlySet<string> = new Set([
  'CompanyRegistered', 'CompanyProfileChanged', 'BranchConfigured', 'BranchScheduleSet', 'HolidayDeclared', 'HolidayChanged',
]);
/** Appended to a changing statement: notifies the caches in the same round trip, once the transaction commits. */
const NOTIFY = `RETURNING pg_notify('${BUSINESS_CHANGED_CHANNEL}', company_id::text)`;

export const businessProjection: Projection = {
  name: 'business',
  version: 1,
  schema: SCHEMA,
  handles: [
    'CompanyRegistered', 'CompanyProfileChanged', 'UserRegistered', 'UserChanged', 'BranchConfigured', 'BranchScheduleSet',
    'HolidayDeclared', 'HolidayChanged', 'AgentRegistered', 'AgentChanged', 'OperatorRegistered', 'OperatorChanged',
    'ContactListCreated', 'ContactListChanged', 'CustomFieldDefined', 'CustomFieldChanged',
  ],
  ddl: `
    CREATE TABLE IF NOT EXISTS companies (
      company_id    integer PRIMARY KEY,
      name          text NOT NULL,
      email         text NOT NULL,
      phone         text NOT NULL,
      website       text NOT NULL,
      address       text NOT NULL,
      description   text NOT NULL,
      timezone      text NOT NULL,
      company_size  text,
      company_types jsonb NOT NULL,
      categories    jsonb NOT NULL,
      created_at    timestamptz NOT NULL,
      updated_at    timestamptz NOT NULL
    );
    CREATE TABLE IF NOT EXISTS users (
      company_id integer NOT NULL,
      user_id    integer NOT NULL,
      email      text NOT NULL,
      first_name text NOT NULL,
      last_name  text NOT NULL,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      PRIMARY KEY (company_id, user_id)
    );
    CREATE TABLE IF NOT EXISTS branches (
      company_id  integer NOT NULL,
      branch_id   integer NOT NULL,
      name        text NOT NULL,
      branch_type text NOT NULL,
      address     text NOT NULL,
      phone       text NOT NULL,
      schedules   jsonb NOT NULL DEFAULT '[]',
      created_at  timestamptz NOT NULL,
      updated_at  timestamptz NOT NULL,
      PRIMARY KEY (company_id, branch_id)
    );
    CREATE TABLE IF NOT EXISTS holidays (
      company_id       integer NOT NULL,
      holiday_id       integer NOT NULL,
      name             text NOT NULL,
      description      text NOT NULL,
      date             date NOT NULL,
      branches         integer[] NOT NULL,
      attention_target text NOT NULL,
      has_custom_hours boolean NOT NULL,
      start_time       text,
      finish_at        text,
      is_active        boolean NOT NULL,
      created_at       timestamptz NOT NULL,
      updated_at       timestamptz NOT NULL,
      PRIMARY KEY (company_id, holiday_id)
    );
    CREATE INDEX IF NOT EXISTS holidays_by_date ON holidays (company_id, date, holiday_id);
    CREATE TABLE IF NOT EXISTS agents (
      company_id integer NOT NULL,
      agent_id   integer NOT NULL,
      name       text NOT NULL,
      version    text NOT NULL,
      PRIMARY KEY (company_id, agent_id)
    );
    CREATE TABLE IF NOT EXISTS operators (
      company_id  integer NOT NULL,
      operator_id integer NOT NULL,
      name        text NOT NULL,
      PRIMARY KEY (company_id, operator_id)
    );
    CREATE TABLE IF NOT EXISTS contact_lists (
      list_id    integer PRIMARY KEY,
      company_id integer NOT NULL,
      name       text NOT NULL,
      is_default boolean NOT NULL,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    );
    CREATE INDEX IF NOT EXISTS contact_lists_company ON contact_lists (company_id);
    CREATE TABLE IF NOT EXISTS custom_fields (
      field_id   integer PRIMARY KEY,
      list_id    integer NOT NULL,
      company_id integer NOT NULL,
      key        text NOT NULL,
      name       text NOT NULL,
      field_type text NOT NULL,
      options    jsonb,
      required   boolean NOT NULL,
      group_name text,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    );
    CREATE INDEX IF NOT EXISTS custom_fields_list ON custom_fields (list_id, field_id);`,

  async apply(tx, event) {
    const e = { type: event.type, data: event.data } as CompanyEvent;
    const at = event.metadata.at;
    if (CACHED.has(e.type)) markChanging(BUSINESS_CHANGED_CHANNEL, e.data.companyId);
    switch (e.type) {
      case 'CompanyRegistered':
      case 'CompanyProfileChanged': {
        const d = e.data;
        await tx.query(
          `INSERT INTO companies (company_id, name, email, phone, website, address, description, timezone, company_size,
                                  company_types, categories, created_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)
           ON CONFLICT (company_id) DO UPDATE SET name = $2, email = $3, phone = $4, website = $5, address = $6,
             description = $7, timezone = $8, company_size = $9, company_types = $10, categories = $11, updated_at = $12
           ${NOTIFY}`,
          [d.companyId, d.name, d.email, d.phone, d.website, d.address, d.description, d.timezone, d.companySize,
            JSON.stringify(d.companyTypes), JSON.stringify(d.categories), at],
        );
        return;
      }
      case 'UserRegistered':
      case 'UserChanged': {
        const d = e.data;
        await tx.query(
          `INSERT INTO users (company_id, user_id, email, first_name, last_name, created_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $6)
           ON CONFLICT (company_id, user_id) DO UPDATE SET email = $3, first_name = $4, last_name = $5, updated_at = $6`,
          [d.companyId, d.userId, d.email, d.firstName, d.lastName, at],
        );
        return;
      }
      case 'BranchConfigured': {
        const d = e.data;
        await tx.query(
          `INSERT INTO branches (company_id, branch_id, name, branch_type, address, phone, created_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
           ON CONFLICT (company_id, branch_id) DO UPDATE SET name = $3, branch_type = $4, address = $5, phone = $6, updated_at = $7
           ${NOTIFY}`,
          [d.companyId, d.branchId, d.name, d.branchType, d.address, d.phone, at],
        );
        return;
      }
      case 'BranchScheduleSet':
        // The branch row exists: BranchConfigured precedes it in the same stream.
        await tx.query(`UPDATE branches SET schedules = $3 WHERE company_id = $1 AND branch_id = $2 ${NOTIFY}`, [
          e.data.companyId, e.data.branchId, JSON.stringify(e.data.schedules),
        ]);
        return;
      case 'HolidayDeclared':
      case 'HolidayChanged': {
        const d = e.data;
        await tx.query(
          `INSERT INTO holidays (company_id, holiday_id, name, description, date, branches, attention_target, has_custom_hours,
                                 start_time, finish_at, is_active, created_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)
           ON CONFLICT (company_id, holiday_id) DO UPDATE SET name = $3, description = $4, date = $5, branches = $6,
             attention_target = $7, has_custom_hours = $8, start_time = $9, finish_at = $10, is_active = $11, updated_at = $12
           ${NOTIFY}`,
          [d.companyId, d.holidayId, d.name, d.description, d.date, d.branches, d.attentionTarget, d.hasCustomHours,
            d.startTime, d.finishAt, d.isActive, at],
        );
        return;
      }
      case 'AgentRegistered':
      case 'AgentChanged':
        await tx.query(
          `INSERT INTO agents (company_id, agent_id, name, version) VALUES ($1, $2, $3, $4)
           ON CONFLICT (company_id, agent_id) DO UPDATE SET name = $3, version = $4`,
          [e.data.companyId, e.data.agentId, e.data.name, e.data.version],
        );
        return;
      case 'OperatorRegistered':
      case 'OperatorChanged':
        await tx.query(
          `INSERT INTO operators (company_id, operator_id, name) VALUES ($1, $2, $3)
           ON CONFLICT (company_id, operator_id) DO UPDATE SET name = $3`,
          [e.data.companyId, e.data.operatorId, e.data.name],
        );
        return;
      case 'ContactListCreated':
      case 'ContactListChanged':
        await tx.query(
          `INSERT INTO contact_lists (list_id, company_id, name, is_default, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5)
           ON CONFLICT (list_id) DO UPDATE SET company_id = $2, name = $3, is_default = $4, updated_at = $5`,
          [e.data.listId, e.data.companyId, e.data.name, e.data.isDefault, at],
        );
        return;
      case 'CustomFieldDefined':
      case 'CustomFieldChanged': {
        const d = e.data;
        await tx.query(
          `INSERT INTO custom_fields (field_id, list_id, company_id, key, name, field_type, options, required, group_name, created_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)
           ON CONFLICT (field_id) DO UPDATE SET list_id = $2, company_id = $3, key = $4, name = $5, field_type = $6,
             options = $7, required = $8, group_name = $9, updated_at = $10`,
          [d.fieldId, d.listId, d.companyId, d.key, d.name, d.fieldType, d.options === null ? null : JSON.stringify(d.options),
            d.required, d.group, at],
        );
        return;
      }
      default:
        return;
    }
  },
};
