import type { PoolClient } from 'pg';
import type { RecordedEvent } from '../../ports/event-store';
import type { Projection } from '../projection';
import { queryNamed } from '../../shared/tx';
import type { CompanyEvent, PhoneNumberEvent } from '../../events/provisioning';
import { ACCOUNTS_CHANGED_CHANNEL, markChanging } from '../change-signals';
import { type SendEvent, sendOutcomeUnknown } from '../../events/sends';
import { type BulkEventData, outcomeUnknown } from '../../events/bulk';

type SendAcceptedData = Extract<SendEvent, { type: 'TemplateSendAccepted' }>['data'];
type SendRejectedData = Extract<SendEvent, { type: 'TemplateSendRejected' }>['data'];

// Read model `accounts`: messaging phone numbers, their templates (variables and buttons as given) and the
// quota window (unique recipients per number with the time of the last send to each, for the rolling 24 h
// count). Fed by the `phonenumber-{id}` streams, the company name from `company-{id}`, and, for the quota
// window, by the send events: single sends and bulk recipients accepted, and single sends and bulk recipients failed
// with an unknown outcome (the provider may have the message: `sendOutcomeUnknown`, `outcomeUnknown`), which count
// as sent (a single send's from its request).
//  - `docs`: per company, the business-accounts document without quota (numbers with their APPROVED templates),
//    rebuilt here on every number/template change, so the endpoint reads one row.
//  - `quota_recipients` + `quota_minutes`: the last send time per (number, recipient), and how many recipients
//    have their last send in each minute; the rolling 24 h count sums whole minutes inside the window and counts
//    the rows of the one minute the window starts in (exact, and cheap for TIER_100000 numbers).
// Every change of a company's document, name or quota is signalled to the endpoint's read cache (change-signals.ts).

const SCHEMA = 'rm_accounts';

export const accountsProjection: Projection = {
  name: 'accounts',
  version: 5, // 5: single sends rejected with an unknown outcome count (TemplateSendRejected; docs/sends.md, "Quota gate")
  schema: SCHEMA,
  handles: [
    'CompanyRegistered', 'CompanyProfileChanged',
    'PhoneNumberRegistered', 'PhoneNumberDetailsChanged', 'MessagingTierChanged', 'QualityRatingChanged',
    'TemplateRegistered', 'TemplateChanged', 'TemplateStatusChanged',
    // Send events that use quota are added here by the sends feature (they call recordQuotaUse in apply).
    'TemplateSendAccepted',
    'BulkRecipientsDispatched', // [bulk sends, issue 5] bulk recipients accepted by the provider use quota too
    'BulkRecipientsRejected', // those whose outcome is unknown (the provider may have the message) too
    'TemplateSendRejected', // single sends whose outcome is unknown too (since v5)
  ],
  /**
   * a failure (bulk or single) uses quota only when the provider may have the message, and names its number and
   * recipient (bulk since v3, single since v5): a refusal is no work here (no transaction, no wait for this projection)
   */
  affects: (event) =>
    (event.type !== 'BulkRecipientsRejected' && event.type !== 'TemplateSendRejected') || (quotaUsesOf(event)?.uses.length ?? 0) > 0,
  ddl: `
    CREATE TABLE IF NOT EXISTS numbers (
      number_id            integer PRIMARY KEY,
      company_id           integer NOT NULL,
      phone_number_id      text NOT NULL,
      display_phone_number text NOT NULL,
      verified_name        text NOT NULL,
      business_name        text NOT NULL,
      is_primary           boolean NOT NULL,
      tier                 text NOT NULL,
      quality_rating       text NOT NULL,
      created_at           timestamptz NOT NULL,
      updated_at           timestamptz NOT NULL
    );
    CREATE INDEX IF NOT EXISTS numbers_company ON numbers (company_id, number_id);
    CREATE INDEX IF NOT EXISTS numbers_provider_id ON numbers (phone_number_id);
    CREATE TABLE IF NOT EXISTS templates (
      template_id integer PRIMARY KEY,
      number_id   integer NOT NULL,
      company_id  integer NOT NULL,
      name        text NOT NULL,
      language    text NOT NULL,
      category    text NOT NULL,
      status      text NOT NULL,
      variables   jsonb NOT NULL,
      buttons     jsonb NOT NULL,
      created_at  timestamptz NOT NULL,
      updated_at  timestamptz NOT NULL
    );
    CREATE INDEX IF NOT EXISTS templates_number ON templates (number_id, name, language);
    CREATE TABLE IF NOT EXISTS quota_recipients (
      number_id    integer NOT NULL,
      recipient    text NOT NULL,
      last_sent_at timestamptz NOT NULL,
      PRIMARY KEY (number_id, recipient)
    );
    CREATE INDEX IF NOT EXISTS quota_recipients_window ON quota_recipients (number_id, last_sent_at);
    CREATE TABLE IF NOT EXISTS quota_minutes (
      number_id  integer NOT NULL,
      minute     timestamptz NOT NULL,
      recipients integer NOT NULL,
      PRIMARY KEY (number_id, minute)
    );
    CREATE TABLE IF NOT EXISTS companies (
      company_id integer PRIMARY KEY,
      name       text NOT NULL
    );
    CREATE TABLE IF NOT EXISTS docs (
      company_id integer PRIMARY KEY,
      numbers    jsonb NOT NULL,
      number_ids integer[] NOT NULL
    );`,

  /**
   * Quota uses in set form: each run of consecutive quota events (single sends, bulk dispatches) becomes one
   * `recordQuotaUses` per number (its set-based twin of `recordQuotaUse`); every other event is applied one by one,
   * in order, between runs.
   */
  async applyBatch(tx, events) {
    let run = new Map<number, { uses: Array<{ recipient: string; at: string }>; recipients: Set<string> }>();
    const flush = async () => {
      for (const [numberId, entry] of run) await recordQuotaUses(tx, numberId, entry.uses);
      run = new Map();
    };
    for (const event of events) {
      const uses = quotaUsesOf(event);
      if (!uses) {
        await flush();
        await accountsProjection.apply(tx, event);
        continue;
      }
      // A recipient already in the run would move between minute buckets one use at a time (leaving a bucket at
      // zero): the run ends before it, so the rows stay exactly those of `apply`.
      if (uses.uses.some((u) => run.get(uses.numberId)?.recipients.has(u.recipient))) await flush();
      let entry = run.get(uses.numberId);
      if (!entry) run.set(uses.numberId, (entry = { uses: [], recipients: new Set() }));
      entry.uses.push(...uses.uses);
      for (const u of uses.uses) entry.recipients.add(u.recipient);
    }
    await flush();
  },

  async apply(tx, event) {
    if (event.type === 'TemplateSendAccepted') {
      // a single send accepted by the provider uses quota (unique recipient per number in 24 h)
      const d = event.data as SendAcceptedData;
      await recordQuotaUse(tx, { numberId: d.numberId, recipient: d.recipientE164, at: d.acceptedAt });
      return;
    }
    if (event.type === 'BulkRecipientsDispatched' || event.type === 'BulkRecipientsRejected' || event.type === 'TemplateSendRejected') {
      // [bulk sends, issue 5] same rule as a single send: one unique recipient per number in the rolling 24 h; a failure
      // whose outcome is unknown counts as sent
      const uses = quotaUsesOf(event);
      if (uses) await recordQuotaUses(tx, uses.numberId, uses.uses);
      return;
    }
    if (event.type === 'CompanyRegistered' || event.type === 'CompanyProfileChanged') {
      const d = (event.data as Extract<CompanyEvent, { type: 'CompanyRegistered' }>['data']);
      markChanging(ACCOUNTS_CHANGED_CHANNEL, d.companyId);
      await tx.query(
        `INSERT INTO companies (company_id, name) VALUES ($1, $2) ON CONFLICT (company_id) DO UPDATE SET name = $2
         RETURNING pg_notify('${ACCOUNTS_CHANGED_CHANNEL}', company_id::text)`,
        [d.companyId, d.name],
      );
      return;
    }
    const e = { type: event.type, data: event.data } as PhoneNumberEvent;
    if (!NUMBER_EVENTS.has(e.type)) return;
    const at = event.metadata.at;
    markChanging(ACCOUNTS_CHANGED_CHANNEL, e.data.companyId);
    switch (e.type) {
      case 'PhoneNumberRegistered':
      case 'PhoneNumberDetailsChanged': {
        const d = e.data;
        await tx.query(
          `INSERT INTO numbers (number_id, company_id, phone_number_id, display_phone_number, verified_name, business_name,
                                is_primary, tier, quality_rating, created_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)
           ON CONFLICT (number_id) DO UPDATE SET company_id = $2, phone_number_id = $3, display_phone_number = $4,
             verified_name = $5, business_name = $6, is_primary = $7, tier = $8, quality_rating = $9, updated_at = $10`,
          [d.numberId, d.companyId, d.phoneNumberId, d.displayPhoneNumber, d.verifiedName, d.businessName, d.isPrimary,
            d.messagingLimitTier, d.qualityRating, at],
        );
        break;
      }
      case 'MessagingTierChanged':
        await tx.query('UPDATE numbers SET tier = $2, updated_at = $3 WHERE number_id = $1', [e.data.numberId, e.data.tier, at]);
        break;
      case 'QualityRatingChanged':
        await tx.query('UPDATE numbers SET quality_rating = $2, updated_at = $3 WHERE number_id = $1', [e.data.numberId, e.data.rating, at]);
        break;
      case 'TemplateRegistered':
      case 'TemplateChanged': {
        const d = e.data;
        await tx.query(
          `INSERT INTO templates (template_id, number_id, company_id, name, language, category, status, variables, buttons, created_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)
           ON CONFLICT (template_id) DO UPDATE SET number_id = $2, company_id = $3, name = $4, language = $5, category = $6,
             status = $7, variables = $8, buttons = $9, updated_at = $10`,
          [d.templateId, d.numberId, d.companyId, d.name, d.language, d.category, d.status, JSON.stringify(d.variables),
            JSON.stringify(d.buttons), at],
        );
        break;
      }
      case 'TemplateStatusChanged':
        await tx.query('UPDATE templates SET status = $2, updated_at = $3 WHERE template_id = $1', [e.data.templateId, e.data.status, at]);
        break;
      default:
        return;
    }
    await refreshDoc(tx, e.data.companyId);
  },
};

const NUMBER_EVENTS: ReadonlySet<string> = new Set([
  'PhoneNumberRegistered', 'PhoneNumberDetailsChanged', 'MessagingTierChanged', 'QualityRatingChanged',
  'TemplateRegistered', 'TemplateChanged', 'TemplateStatusChanged',
]);

/**
 * The quota uses an event records (single send accepted, bulk recipients dispatched, single send or bulk recipients
 * failed whose outcome is unknown), else undefined. A failure event appended before it carried `numberId` and
 * `recipientE164` records none (a bulk's: the work table's union counted it for the quota gates while it was in the
 * window; a single send's: its reservation, ~30 s). A single send's counts from its request (`requestedAt`).
 */
function quotaUsesOf(event: RecordedEvent): { numberId: number; uses: Array<{ recipient: string; at: string }> } | undefined {
  if (event.type === 'TemplateSendAccepted') {
    const d = event.data as SendAcceptedData;
    return { numberId: d.numberId, uses: [{ recipient: d.recipientE164, at: d.acceptedAt }] };
  }
  if (event.type === 'BulkRecipientsDispatched') {
    const d = event.data as { numberId: number; recipients: Array<{ recipientE164: string; at: string }> };
    return { numberId: d.numberId, uses: d.recipients.map((r) => ({ recipient: r.recipientE164, at: r.at })) };
  }
  if (event.type === 'TemplateSendRejected') {
    const d = event.data as SendRejectedData;
    if (d.numberId === undefined || d.recipientE164 === undefined || !sendOutcomeUnknown(d.code)) return undefined;
    return { numberId: d.numberId, uses: [{ recipient: d.recipientE164, at: d.requestedAt ?? d.rejectedAt }] };
  }
  if (event.type === 'BulkRecipientsRejected') {
    const d = event.data as BulkEventData<'BulkRecipientsRejected'>;
    if (d.numberId === undefined) return undefined;
    const uses = d.recipients.flatMap((r) => (r.recipientE164 !== undefined && outcomeUnknown(r) ? [{ recipient: r.recipientE164, at: r.at }] : []));
    return { numberId: d.numberId, uses };
  }
  return undefined;
}

/** Rebuilds a company's business-accounts document (numbers primary first, then by id; APPROVED templates by name, language). */
async function refreshDoc(tx: PoolClient, companyId: number): Promise<void> {
  await tx.query(
    `INSERT INTO docs (company_id, numbers, number_ids)
     SELECT $1,
            COALESCE(jsonb_agg(jsonb_build_object(
              'id', n.number_id, 'phoneNumberId', n.phone_number_id, 'displayPhoneNumber', n.display_phone_number,
              'verifiedName', n.verified_name, 'businessName', n.business_name, 'isPrimary', n.is_primary,
              'messagingLimitTier', n.tier,
              'templates', COALESCE((
                SELECT jsonb_agg(jsonb_build_object('name', t.name, 'language', t.language, 'category', t.category,
                                                    'variables', t.variables, 'buttons', t.buttons)
                                 ORDER BY t.name, t.language, t.template_id)
                  FROM templates t WHERE t.number_id = n.number_id AND t.status = 'APPROVED'), '[]'::jsonb))
              ORDER BY n.is_primary DESC, n.number_id), '[]'::jsonb),
            COALESCE(array_agg(n.number_id ORDER BY n.is_primary DESC, n.number_id), '{}')
       FROM numbers n WHERE n.company_id = $1
     ON CONFLICT (company_id) DO UPDATE SET numbers = EXCLUDED.numbers, number_ids = EXCLUDED.number_ids
     RETURNING pg_notify('${ACCOUNTS_CHANGED_CHANNEL}', company_id::text)`,
    [companyId],
  );
}

/** Minute buckets and recipient rows older than this (before the event's time) are pruned. */
const PRUNE_AFTER = '25 hours';
/**
 * Where the pruning of a number's rows starts: 25 h before the send's time ($2), or before Postgres's when that is
 * earlier. A send stamped by a process whose clock runs ahead pruned rows still in the 24-h window of the processes on
 * time, which then admitted a recipient past the tier (found in review, 2026-11-28: docs/reliability.md, "Clocks of
 * several processes"). A rebuild (events older than its clock) prunes as before.
 */
const PRUNE_BEFORE = `least($2::timestamptz, now()) - interval '${PRUNE_AFTER}'`;

/**
 * Records that `numberId` sent to `recipient` at `at` (a send that counts against the number's daily quota of
 * unique recipients). For the sends feature: call it from this projection's `apply` for its send events (the
 * runner has set `search_path` to the schema being written). Idempotent: keeps the latest time per recipient
 * (an older or repeated use changes nothing) and moves the recipient to the minute bucket of its latest send.
 */
export async function recordQuotaUse(tx: PoolClient, use: { numberId: number; recipient: string; at: string | Date }): Promise<void> {
  const at = new Date(use.at);
  const prev = await tx.query<{ last_sent_at: Date }>(
    'SELECT last_sent_at FROM quota_recipients WHERE number_id = $1 AND recipient = $2',
    [use.numberId, use.recipient],
  );
  const before = prev.rows[0]?.last_sent_at;
  if (before && before.getTime() >= at.getTime()) return;
  if (before) {
    await tx.query('UPDATE quota_recipients SET last_sent_at = $3 WHERE number_id = $1 AND recipient = $2', [use.numberId, use.recipient, at]);
    await tx.query(
      `UPDATE quota_minutes SET recipients = recipients - 1 WHERE number_id = $1 AND minute = date_trunc('minute', $2::timestamptz)`,
      [use.numberId, before],
    );
  } else {
    await tx.query('INSERT INTO quota_recipients (number_id, recipient, last_sent_at) VALUES ($1, $2, $3)', [use.numberId, use.recipient, at]);
  }
  // (the company of the number is told to the business-accounts cache in the same statement)
  const bucket = await tx.query<{ fresh: boolean; company_id: number | null }>(
    `WITH owner AS (SELECT company_id FROM numbers WHERE number_id = $1)
     INSERT INTO quota_minutes (number_id, minute, recipients) VALUES ($1, date_trunc('minute', $2::timestamptz), 1)
     ON CONFLICT (number_id, minute) DO UPDATE SET recipients = quota_minutes.recipients + 1
     RETURNING (xmax = 0) AS fresh, (SELECT company_id FROM owner) AS company_id,
               pg_notify('${ACCOUNTS_CHANGED_CHANNEL}', COALESCE((SELECT company_id FROM owner)::text, '*'))`,
    [use.numberId, at],
  );
  markChanging(ACCOUNTS_CHANGED_CHANNEL, bucket.rows[0].company_id ?? '*');
  if (bucket.rows[0].fresh) {
    // a new minute for this number: drop what no window can reach any more (relative to the event's time)
    await tx.query(`DELETE FROM quota_minutes WHERE number_id = $1 AND minute < ${PRUNE_BEFORE}`, [use.numberId, at]);
    await tx.query(`DELETE FROM quota_recipients WHERE number_id = $1 AND last_sent_at < ${PRUNE_BEFORE}`, [use.numberId, at]);
  }
}

/**
 * [bulk sends, issue 5] The set-based twin of `recordQuotaUse` for many uses of one number (a bulk dispatch
 * window, up to a few hundred recipients): the same rows end up in `quota_recipients` and `quota_minutes`
 * (test/integration/bulk-quota.test.ts compares both functions on random uses) in four statements instead of
 * about five per recipient, so a 100k bulk does not keep this projection's batches (and, through them, the
 * event store's read horizon) busy for minutes. Keep the two in step.
 */
export async function recordQuotaUses(
  tx: PoolClient,
  numberId: number,
  uses: ReadonlyArray<{ recipient: string; at: string | Date }>,
): Promise<void> {
  if (uses.length === 0) return;
  const r = await queryNamed(tx, 'accounts_record_quota_uses',
    `WITH u AS (
       SELECT recipient, max(at) AS at FROM unnest($2::text[], $3::timestamptz[]) AS x(recipient, at) GROUP BY recipient),
     prev AS (
       SELECT q.recipient, q.last_sent_at FROM quota_recipients q WHERE q.number_id = $1 AND q.recipient = ANY($2::text[])),
     changed AS (
       SELECT u.recipient, u.at, p.last_sent_at AS before FROM u LEFT JOIN prev p ON p.recipient = u.recipient
        WHERE p.last_sent_at IS NULL OR p.last_sent_at < u.at),
     kept AS (
       INSERT INTO quota_recipients (number_id, recipient, last_sent_at) SELECT $1, recipient, at FROM changed
       ON CONFLICT (number_id, recipient) DO UPDATE SET last_sent_at = EXCLUDED.last_sent_at RETURNING 1),
     delta AS (
       SELECT minute, sum(d)::int AS d, min(at) FILTER (WHERE d > 0) AS first_at FROM (
         SELECT date_trunc('minute', at) AS minute, 1 AS d, at FROM changed
         UNION ALL SELECT date_trunc('minute', before), -1, NULL FROM changed WHERE before IS NOT NULL) x
       GROUP BY minute HAVING sum(d) <> 0),
     dec AS (
       UPDATE quota_minutes m SET recipients = m.recipients + delta.d FROM delta
        WHERE delta.d < 0 AND m.number_id = $1 AND m.minute = delta.minute RETURNING 1),
     inc AS (
       INSERT INTO quota_minutes (number_id, minute, recipients) SELECT $1, minute, d FROM delta WHERE d > 0
       ON CONFLICT (number_id, minute) DO UPDATE SET recipients = quota_minutes.recipients + EXCLUDED.recipients
       RETURNING (xmax = 0) AS fresh, minute)
     SELECT (SELECT count(*)::int FROM changed) AS changed,
            (SELECT max(delta.first_at) FROM inc JOIN delta ON delta.minute = inc.minute WHERE inc.fresh) AS fresh_at,
            (SELECT company_id FROM numbers WHERE number_id = $1) AS company_id,
            -- the business-accounts cache of the number's company, told in the same statement
            CASE WHEN EXISTS (SELECT 1 FROM changed)
                 THEN pg_notify('${ACCOUNTS_CHANGED_CHANNEL}', COALESCE((SELECT company_id FROM numbers WHERE number_id = $1)::text, '*')) END AS notified`,
    [numberId, uses.map((x) => x.recipient), uses.map((x) => new Date(x.at))],
  );
  const row = r.rows[0] as { changed: number; fresh_at: Date | null; company_id: number | null };
  if (row.changed === 0) return;
  markChanging(ACCOUNTS_CHANGED_CHANNEL, row.company_id ?? '*');
  if (row.fresh_at) {
    // a new minute for this number: drop what no window can reach any more (relative to the event's time)
    await tx.query(`DELETE FROM quota_minutes WHERE number_id = $1 AND minute < ${PRUNE_BEFORE}`, [numberId, row.fresh_at]);
    await tx.query(`DELETE FROM quota_recipients WHERE number_id = $1 AND last_sent_at < ${PRUNE_BEFORE}`, [numberId, row.fresh_at]);
  }
}
