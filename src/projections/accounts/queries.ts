import type { Pool } from 'pg';
import type { MESSAGING_TIERS, VARIABLE_TYPES } from '../../events/provisioning';

// Query functions of the `accounts` read model, and the quota arithmetic shared by every feature that sends.

const S = 'rm_accounts';

export type MessagingTier = (typeof MESSAGING_TIERS)[number];

/**
 * `dailyLimit` reported for TIER_UNLIMITED: the largest exact JSON integer (2^53 - 1). The spec types the
 * limit as an integer, so no null; with this value the same formulas hold for every tier
 * (remaining = limit - used, usagePercentage ≈ 0, canSend true). See docs/provisioning.md.
 */
export const UNLIMITED_DAILY_LIMIT = Number.MAX_SAFE_INTEGER;

export const TIERS: Readonly<Record<MessagingTier, { dailyLimit: number; spacingMs: number }>> = {
  TIER_50: { dailyLimit: 50, spacingMs: 1200 },
  TIER_250: { dailyLimit: 250, spacingMs: 240 },
  TIER_1000: { dailyLimit: 1000, spacingMs: 60 },
  TIER_10000: { dailyLimit: 10000, spacingMs: 6 },
  TIER_100000: { dailyLimit: 100000, spacingMs: 0.6 },
  TIER_UNLIMITED: { dailyLimit: UNLIMITED_DAILY_LIMIT, spacingMs: 0 },
};

export const dailyLimitOf = (tier: MessagingTier): number => TIERS[tier].dailyLimit;
/** The tier's recommended spacing between sends, in milliseconds (0: no delay). */
export const recommendedSpacingMs = (tier: MessagingTier): number => TIERS[tier].spacingMs;

/** The rolling window of the quota. */
export const QUOTA_WINDOW_MS = 24 * 60 * 60 * 1000;

export interface Quota {
  dailyLimit: number;
  uniqueNumbersSent24h: number;
  remaining: number;
  /** 0-100, two decimals */
  usagePercentage: number;
  canSend: boolean;
}

/** The quota of a number of `tier` that sent to `used` unique recipients in the last 24 h. */
export function computeQuota(tier: MessagingTier, used: number): Quota {
  const dailyLimit = dailyLimitOf(tier);
  const remaining = Math.max(0, dailyLimit - used);
  // 100 only when full: rounding must not show a number that can still send (99,999 of 100,000) as full
  const usagePercentage = remaining > 0 ? Math.min(99.99, Math.round((used / dailyLimit) * 100 * 100) / 100) : 100;
  return { dailyLimit, uniqueNumbersSent24h: used, remaining, usagePercentage, canSend: remaining > 0 };
}

/**
 * The window `(now - 24 h, ...]` as the quota tables count it: whole minute buckets after `edgeMinute`, plus the
 * recipients whose last send falls in the edge minute after `start`.
 */
export function quotaWindow(now: Date): { start: Date; edgeMinute: Date; edgeEnd: Date } {
  const start = new Date(now.getTime() - QUOTA_WINDOW_MS);
  const edgeMinute = new Date(Math.floor(start.getTime() / 60_000) * 60_000);
  return { start, edgeMinute, edgeEnd: new Date(edgeMinute.getTime() + 60_000) };
}

/** SQL for the unique recipients of number `$n` in the window ($e edge minute, $s start, $x edge end); also the send quota gate's. */
export const usedSql = (n: string, e: string, s: string, x: string) => `(
  COALESCE((SELECT sum(m.recipients) FROM ${S}.quota_minutes m WHERE m.number_id = ${n} AND m.minute > ${e}), 0)
  + (SELECT count(*) FROM ${S}.quota_recipients q WHERE q.number_id = ${n} AND q.last_sent_at > ${s} AND q.last_sent_at < ${x}))::int`;

/**
 * SQL for the recipients of number `n` reserved by the single sends' quota gate (`public.send_quota_reservations`,
 * live at `now`) that the read model does not have in the window after `s`: sends to new recipients at the provider
 * near the limit (~30 s), and keyed sends answered 503 SEND_OUTCOME_UNKNOWN, held for the 24 h from their request until
 * the read model has their recipient (docs/sends.md, "Quota gate"). What GET business-accounts adds to the window, so
 * that it counts what the gate counts (`usedSql` is the read model's alone: the gate adds the reservations itself).
 */
export const reservedSql = (n: string, s: string, now: string) => `(
  SELECT count(DISTINCT r.recipient)::int FROM public.send_quota_reservations r
   WHERE r.number_id = ${n} AND r.expires_at > ${now}
     AND NOT EXISTS (SELECT 1 FROM ${S}.quota_recipients q WHERE q.number_id = ${n} AND q.recipient = r.recipient AND q.last_sent_at > ${s}))`;

/** Unique recipients `numberId` sent to in the 24 h before `now`. */
export async function uniqueRecipientsSent24h(pool: Pool, numberId: number, now: Date): Promise<number> {
  const w = quotaWindow(now);
  const r = await pool.query<{ n: number }>({
    name: 'accounts_quota_used',
    text: `SELECT ${usedSql('$1', '$2', '$3', '$4')} AS n`,
    values: [numberId, w.edgeMinute, w.start, w.edgeEnd],
  });
  return r.rows[0].n;
}

export async function quotaOf(pool: Pool, numberId: number, tier: MessagingTier, now: Date): Promise<Quota> {
  return computeQuota(tier, await uniqueRecipientsSent24h(pool, numberId, now));
}

export interface TemplateVariable {
  name: string;
  type: (typeof VARIABLE_TYPES)[number];
  position: number;
  isRequired: boolean;
  component: 'HEADER' | 'BODY' | 'FOOTER' | 'BUTTON';
}

export interface TemplateButton {
  type: 'URL' | 'QUICK_REPLY' | 'PHONE_NUMBER' | 'COPY_CODE';
  text: string;
  url?: string;
  phoneNumber?: string;
}

export interface AccountTemplate {
  name: string;
  language: string;
  category: string;
  variables: TemplateVariable[];
  buttons: TemplateButton[];
}

export interface AccountPhoneNumber {
  id: number;
  phoneNumberId: string;
  displayPhoneNumber: string;
  verifiedName: string;
  businessName: string;
  isPrimary: boolean;
  messagingLimitTier: MessagingTier;
  quota: Quota;
  templates: AccountTemplate[];
}

export interface BusinessAccounts {
  companyName: string;
  phoneNumbers: AccountPhoneNumber[];
  /** until when (ms) the quota use stays as reported unless something is sent: the earliest recipient's leaving */
  quotaStableUntil: number | undefined;
}

/**
 * The business-accounts view of a company in one query: the document the projection keeps per company (numbers
 * primary first, then by id, each with its APPROVED templates by name, language) and each number's unique
 * recipients of the rolling 24 h window, with those the quota gate holds reserved (`reservedSql`: a keyed send whose
 * outcome is unknown counts from its 503, as in the gate). undefined when the company is unknown. `quotaStableUntil`
 * also ends when the first reservation expires (a reservation's insert and delete are not signalled to the cache,
 * but for the 503's hold: an in-flight send near the limit may show, or not, for its ~30 s).
 */
export async function getBusinessAccounts(pool: Pool, companyId: number, now: Date): Promise<BusinessAccounts | undefined> {
  const w = quotaWindow(now);
  const r = await pool.query({
    name: 'accounts_business_accounts',
    text: `SELECT c.name AS company_name, d.numbers,
                  ARRAY(SELECT ${usedSql('u.id', '$2', '$3', '$4')} + ${reservedSql('u.id', '$3', '$5')}
                          FROM unnest(d.number_ids) WITH ORDINALITY AS u(id, ord) ORDER BY u.ord) AS used,
                  (SELECT min(q.last_sent_at) FROM unnest(d.number_ids) AS u(id)
                     CROSS JOIN LATERAL (SELECT min(last_sent_at) AS last_sent_at FROM ${S}.quota_recipients
                                          WHERE number_id = u.id AND last_sent_at > $3) q) AS first_in_window,
                  (SELECT min(r.expires_at) FROM unnest(d.number_ids) AS u(id)
                     JOIN public.send_quota_reservations r ON r.number_id = u.id AND r.expires_at > $5) AS first_reservation_expiry
             FROM ${S}.companies c LEFT JOIN ${S}.docs d ON d.company_id = c.company_id
            WHERE c.company_id = $1`,
    values: [companyId, w.edgeMinute, w.start, w.edgeEnd, now],
  });
  const row = r.rows[0];
  if (!row) return undefined;
  const numbers = (row.numbers ?? []) as Array<Omit<AccountPhoneNumber, 'quota'>>;
  const used = (row.used ?? []) as number[];
  const first = row.first_in_window as Date | null;
  const reservationExpiry = row.first_reservation_expiry as Date | null;
  const stable = [first ? first.getTime() + QUOTA_WINDOW_MS : undefined, reservationExpiry?.getTime()].filter((x) => x !== undefined);
  return {
    companyName: row.company_name,
    phoneNumbers: numbers.map(({ templates, ...n }, i) => ({ ...n, quota: computeQuota(n.messagingLimitTier, used[i] ?? 0), templates })),
    quotaStableUntil: stable.length > 0 ? Math.min(...stable) : undefined,
  };
}

export interface NumberRecord {
  id: number;
  companyId: number;
  phoneNumberId: string;
  displayPhoneNumber: string;
  verifiedName: string;
  businessName: string;
  isPrimary: boolean;
  messagingLimitTier: MessagingTier;
  qualityRating: 'GREEN' | 'YELLOW' | 'RED';
}

const toNumber = (n: any): NumberRecord => ({
  id: n.number_id, companyId: n.company_id, phoneNumberId: n.phone_number_id, displayPhoneNumber: n.display_phone_number,
  verifiedName: n.verified_name, businessName: n.business_name, isPrimary: n.is_primary, messagingLimitTier: n.tier,
  qualityRating: n.quality_rating,
});

/** A company's number by the provider's phone number id (what send requests name). */
export async function findNumberByProviderId(pool: Pool, companyId: number, phoneNumberId: string): Promise<NumberRecord | undefined> {
  const r = await pool.query(`SELECT * FROM ${S}.numbers WHERE company_id = $1 AND phone_number_id = $2`, [companyId, phoneNumberId]);
  return r.rows[0] ? toNumber(r.rows[0]) : undefined;
}

export async function findNumberById(pool: Pool, numberId: number): Promise<NumberRecord | undefined> {
  const r = await pool.query(`SELECT * FROM ${S}.numbers WHERE number_id = $1`, [numberId]);
  return r.rows[0] ? toNumber(r.rows[0]) : undefined;
}

export interface TemplateRecord {
  id: number;
  numberId: number;
  companyId: number;
  name: string;
  language: string;
  category: string;
  status: string;
  variables: TemplateVariable[];
  buttons: TemplateButton[];
}

const toTemplate = (t: any): TemplateRecord => ({
  id: t.template_id, numberId: t.number_id, companyId: t.company_id, name: t.name, language: t.language, category: t.category,
  status: t.status, variables: t.variables, buttons: t.buttons,
});

/** A template of a number by name and language, whatever its status. */
export async function findTemplate(pool: Pool, numberId: number, name: string, language: string): Promise<TemplateRecord | undefined> {
  const r = await pool.query(`SELECT * FROM ${S}.templates WHERE number_id = $1 AND name = $2 AND language = $3`, [numberId, name, language]);
  return r.rows[0] ? toTemplate(r.rows[0]) : undefined;
}

export async function findTemplateById(pool: Pool, templateId: number): Promise<TemplateRecord | undefined> {
  const r = await pool.query(`SELECT * FROM ${S}.templates WHERE template_id = $1`, [templateId]);
  return r.rows[0] ? toTemplate(r.rows[0]) : undefined;
}

/**
 * A company's number (by provider phone number id) and that number's template (by name and language, whatever its
 * status), in one round trip: what a send validates against. `template` is undefined when the number has none.
 */
export async function findNumberAndTemplate(
  pool: Pool,
  companyId: number,
  phoneNumberId: string,
  name: string,
  language: string,
): Promise<{ number: NumberRecord; template: TemplateRecord | undefined } | undefined> {
  const r = await pool.query({
    name: 'accounts_number_and_template',
    text: `SELECT to_jsonb(n) AS number, to_jsonb(t) AS template
             FROM ${S}.numbers n
             LEFT JOIN ${S}.templates t ON t.number_id = n.number_id AND t.name = $3 AND t.language = $4
            WHERE n.company_id = $1 AND n.phone_number_id = $2
            ORDER BY t.template_id LIMIT 1`,
    values: [companyId, phoneNumberId, name, language],
  });
  const row = r.rows[0];
  return row ? { number: toNumber(row.number), template: row.template ? toTemplate(row.template) : undefined } : undefined;
}
