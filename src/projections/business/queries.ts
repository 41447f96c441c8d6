import type { Pool } from 'pg';
import { companySizeDisplay, daysDisplay } from './labels';

export type CompanySize = 'MICRO' | 'SMALL' | 'MEDIUM' | 'LARGE' | 'ENTERPRISE';
export type CompanyType = 'ECOMMERCE' | 'CLINIC';
export type Weekday = 'MONDAY' | 'TUESDAY' | 'WEDNESDAY' | 'THURSDAY' | 'FRIDAY' | 'SATURDAY' | 'SUNDAY';
export type AttentionTarget = 'VIRTUAL_ATTENTION' | 'BRANCH' | 'ALL_BRANCHES' | 'ALL';

// Query functions of the `business` read model (qualified live names; HTTP and other features call these).

const S = 'rm_business';

export interface BusinessInfo {
  id: number;
  name: string;
  email: string;
  phone: string;
  website: string;
  address: string;
  description: string;
  timezone: string;
  companySize: CompanySize | null;
  companySizeDisplay: string | null;
  companyTypes: CompanyType[];
  categories: string[];
}

export async function getBusinessInfo(pool: Pool, companyId: number): Promise<BusinessInfo | undefined> {
  const r = await pool.query({
    name: 'business_info',
    text: `SELECT company_id, name, email, phone, website, address, description, timezone, company_size, company_types, categories
             FROM ${S}.companies WHERE company_id = $1`,
    values: [companyId],
  });
  const c = r.rows[0];
  if (!c) return undefined;
  return {
    id: c.company_id, name: c.name, email: c.email, phone: c.phone, website: c.website, address: c.address,
    description: c.description, timezone: c.timezone, companySize: c.company_size,
    companySizeDisplay: companySizeDisplay(c.company_size), companyTypes: c.company_types, categories: c.categories,
  };
}

export async function companyExists(pool: Pool, companyId: number): Promise<boolean> {
  const r = await pool.query(`SELECT 1 FROM ${S}.companies WHERE company_id = $1`, [companyId]);
  return r.rowCount === 1;
}

/** Whether any company was ever registered (the demo seeds a fresh installation only). */
export async function anyCompanyRegistered(pool: Pool): Promise<boolean> {
  const r = await pool.query(`SELECT EXISTS (SELECT 1 FROM ${S}.companies) AS any`);
  return r.rows[0].any === true;
}

export interface ScheduleView {
  id: number;
  days: Weekday[];
  daysDisplay: string;
  startTime: string;
  finishAt: string;
  isActive: boolean;
  description: string;
  specificDate: string | null;
}

export interface BranchHours {
  branchId: number;
  branchName: string;
  branchType: 'PHYSICAL' | 'ONLINE';
  address: string;
  schedules: ScheduleView[];
}

interface StoredSchedule {
  id: number;
  days: Weekday[];
  startTime: string;
  finishAt: string;
  isActive: boolean;
  description: string;
  specificDate: string | null;
}

export async function getBusinessHours(pool: Pool, companyId: number): Promise<BranchHours[]> {
  const r = await pool.query({
    name: 'business_hours',
    text: `SELECT branch_id, name, branch_type, address, schedules FROM ${S}.branches WHERE company_id = $1 ORDER BY branch_id`,
    values: [companyId],
  });
  return r.rows.map((b) => ({
    branchId: b.branch_id,
    branchName: b.name,
    branchType: b.branch_type,
    address: b.address,
    schedules: (b.schedules as StoredSchedule[]).map((s) => ({
      id: s.id, days: s.days, daysDisplay: daysDisplay(s.days, s.specificDate), startTime: s.startTime, finishAt: s.finishAt,
      isActive: s.isActive, description: s.description, specificDate: s.specificDate,
    })),
  }));
}

export interface BranchDetail {
  id: number;
  company: number;
  name: string;
  address: string;
  phone: string;
  branchType: 'PHYSICAL' | 'ONLINE';
  createdAt: string;
  updatedAt: string;
}

export interface HolidayView {
  id: number;
  company: number;
  name: string;
  description: string;
  date: string;
  branches: number[];
  branchesDetail: BranchDetail[];
  attentionTarget: AttentionTarget;
  hasCustomHours: boolean;
  startTime: string | null;
  finishAt: string | null;
  isActive: boolean;
  createdAt: string;
  updatedAt: string;
}

const iso = (t: Date | string): string => (t instanceof Date ? t : new Date(t)).toISOString();

/** Holidays of a company with `from <= date <= to` (both optional, `YYYY-MM-DD`), by date then id. */
export async function getHolidays(pool: Pool, companyId: number, range: { from?: string; to?: string } = {}): Promise<HolidayView[]> {
  const r = await pool.query({
    name: 'business_holidays',
    text: `SELECT h.holiday_id, h.company_id, h.name, h.description, h.date::text AS date, h.branches, h.attention_target,
            h.has_custom_hours, h.start_time, h.finish_at, h.is_active, h.created_at, h.updated_at,
            COALESCE((SELECT json_agg(json_build_object(
                        'id', b.branch_id, 'company', b.company_id, 'name', b.name, 'address', b.address, 'phone', b.phone,
                        'branchType', b.branch_type, 'createdAt', b.created_at, 'updatedAt', b.updated_at) ORDER BY u.ord)
                        FROM unnest(h.branches) WITH ORDINALITY AS u(branch_id, ord)
                        JOIN ${S}.branches b ON b.company_id = h.company_id AND b.branch_id = u.branch_id), '[]') AS details
       FROM ${S}.holidays h
      WHERE h.company_id = $1 AND ($2::date IS NULL OR h.date >= $2::date) AND ($3::date IS NULL OR h.date <= $3::date)
      ORDER BY h.date, h.holiday_id`,
    values: [companyId, range.from ?? null, range.to ?? null],
  });
  return r.rows.map((h) => ({
    id: h.holiday_id,
    company: h.company_id,
    name: h.name,
    description: h.description,
    date: h.date,
    branches: h.branches,
    branchesDetail: (h.details as Array<BranchDetail>).map((b) => ({ ...b, createdAt: iso(b.createdAt), updatedAt: iso(b.updatedAt) })),
    attentionTarget: h.attention_target,
    hasCustomHours: h.has_custom_hours,
    startTime: h.start_time,
    finishAt: h.finish_at,
    isActive: h.is_active,
    createdAt: iso(h.created_at),
    updatedAt: iso(h.updated_at),
  }));
}

export interface ContactListView {
  id: number;
  companyId: number;
  name: string;
  isDefault: boolean;
}

/** The contact lists of a company, by id. */
export async function getContactLists(pool: Pool, companyId: number): Promise<ContactListView[]> {
  const r = await pool.query(`SELECT list_id, company_id, name, is_default FROM ${S}.contact_lists WHERE company_id = $1 ORDER BY list_id`, [companyId]);
  return r.rows.map((l) => ({ id: l.list_id, companyId: l.company_id, name: l.name, isDefault: l.is_default }));
}

export interface CustomFieldView {
  id: number;
  listId: number;
  companyId: number;
  key: string;
  name: string;
  fieldType: string;
  /** selector / multiselector only */
  options: string[] | null;
  required: boolean;
  /** name of the repeatable group, or null; grouped fields cannot be set through the API */
  group: string | null;
}

/** The custom fields configured for a contact list, by id. */
export async function getCustomFields(pool: Pool, listId: number): Promise<CustomFieldView[]> {
  const r = await pool.query(
    `SELECT field_id, list_id, company_id, key, name, field_type, options, required, group_name
       FROM ${S}.custom_fields WHERE list_id = $1 ORDER BY field_id`,
    [listId],
  );
  return r.rows.map((f) => ({
    id: f.field_id, listId: f.list_id, companyId: f.company_id, key: f.key, name: f.name, fieldType: f.field_type,
    options: f.options, required: f.required, group: f.group_name,
  }));
}

export interface UserView {
  id: number;
  companyId: number;
  email: string;
  firstName: string;
  lastName: string;
}

/** A user of a company (e.g. the owner of an API key: `created_by` of a bulk send). */
export async function getCompanyUser(pool: Pool, companyId: number, userId: number): Promise<UserView | undefined> {
  const r = await pool.query(`SELECT * FROM ${S}.users WHERE company_id = $1 AND user_id = $2`, [companyId, userId]);
  const u = r.rows[0];
  return u ? { id: u.user_id, companyId: u.company_id, email: u.email, firstName: u.first_name, lastName: u.last_name } : undefined;
}

export interface AgentView {
  id: number;
  name: string;
  version: string;
}

export async function getAgents(pool: Pool, companyId: number): Promise<AgentView[]> {
  const r = await pool.query(`SELECT agent_id, name, version FROM ${S}.agents WHERE company_id = $1 ORDER BY agent_id`, [companyId]);
  return r.rows.map((a) => ({ id: a.agent_id, name: a.name, version: a.version }));
}

export interface OperatorView {
  id: number;
  name: string;
}

export async function getOperators(pool: Pool, companyId: number): Promise<OperatorView[]> {
  const r = await pool.query(`SELECT operator_id, name FROM ${S}.operators WHERE company_id = $1 ORDER BY operator_id`, [companyId]);
  return r.rows.map((o) => ({ id: o.operator_id, name: o.name }));
}
