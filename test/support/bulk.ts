import type { Pool } from 'pg';
import { SandboxProvider } from '../../src/adapters/provider/sandbox';
import type { MessagingProvider, SendTemplateRequest, SendTemplateResult } from '../../src/ports/provider';
import { getBulkSend, type BulkSendRow } from '../../src/projections/bulk/queries';
import type { Services } from '../../src/services';
import { sweepBulkLeases, type SweepOptions, type SweepReport } from '../../src/workers/bulk-lease-cron';

// Provisioning and doubles for the bulk-send suites: a company with numbers of different tiers, a second
// company for isolation, a fake clock whose sleep advances it, and a provider that counts sends per recipient.

export const BULK_CO = {
  companyId: 501,
  key: 'sbk_bulk501aaaaaaaaaaaaaaaaaaaaaaaaaa',
  user: { id: 81, email: 'ops81@bulk.example', first_name: 'Olga', last_name: 'Perez' },
  unlimited: { id: 51, phoneNumberId: '300000000000051' },
  pacing: { id: 52, phoneNumberId: '300000000000052' },
  quota: { id: 53, phoneNumberId: '300000000000053' },
  busy: { id: 55, phoneNumberId: '300000000000055' },
};
export const BULK_OTHER = {
  companyId: 502,
  key: 'sbk_bulk502bbbbbbbbbbbbbbbbbbbbbbbbbb',
  number: { id: 54, phoneNumberId: '300000000000054' },
};

const welcome = (id: number, status = 'APPROVED', name = 'welcome') => ({
  id, name, language: 'es', category: 'MARKETING', status, variables: [], buttons: [],
});
export const ORDER_TEMPLATE = {
  id: 5102, name: 'order_update', language: 'es', category: 'UTILITY', status: 'APPROVED',
  variables: [
    { name: 'name', type: 'TEXT', position: 1, isRequired: true, component: 'BODY' },
    { name: 'code', type: 'TEXT', position: 1, isRequired: true, component: 'BUTTON' },
  ],
  buttons: [{ type: 'URL', text: 'Track', url: 'https://shop.example/t/{{1}}' }],
};

const number = (id: number, phoneNumberId: string, tier: string, templates: unknown[]) => ({
  id, phoneNumberId, displayPhoneNumber: `+54 11 4000-${phoneNumberId.slice(-4)}`, verifiedName: 'Bulk Shop', businessName: 'Bulk Shop SA',
  isPrimary: id === 51, messagingLimitTier: tier, qualityRating: 'GREEN', templates,
});

const company = (id: number, key: string, user: { id: number; email: string; first_name: string; last_name: string }, phoneNumbers: unknown[]) => ({
  id, name: `Bulk Co ${id}`, email: `c${id}@bulk.example`, phone: '+541140000000', website: 'https://bulk.example', address: 'Calle 2',
  description: 'bulk', timezone: 'America/Argentina/Buenos_Aires', companySize: 'SMALL', companyTypes: ['ECOMMERCE'], categories: [],
  users: [user],
  apiKeys: [{ name: `key ${id}`, key, userId: user.id, active: true, expiresAt: null }],
  contactLists: [{ id: id * 10, name: 'Clientes', isDefault: true, customFields: [] }],
  contacts: [], branches: [], holidays: [], agents: [], operators: [],
  phoneNumbers,
});

export function bulkFixture(): any {
  return {
    companies: [
      company(BULK_CO.companyId, BULK_CO.key, BULK_CO.user, [
        number(BULK_CO.unlimited.id, BULK_CO.unlimited.phoneNumberId, 'TIER_UNLIMITED', [welcome(5101), ORDER_TEMPLATE, welcome(5103, 'PAUSED', 'promo')]),
        number(BULK_CO.pacing.id, BULK_CO.pacing.phoneNumberId, 'TIER_50', [welcome(5201)]),
        number(BULK_CO.quota.id, BULK_CO.quota.phoneNumberId, 'TIER_50', [welcome(5301)]),
        number(BULK_CO.busy.id, BULK_CO.busy.phoneNumberId, 'TIER_UNLIMITED', [welcome(5501)]),
      ]),
      company(BULK_OTHER.companyId, BULK_OTHER.key, { id: 82, email: 'ops82@other.example', first_name: 'Otto', last_name: 'Ruiz' }, [
        number(BULK_OTHER.number.id, BULK_OTHER.number.phoneNumberId, 'TIER_UNLIMITED', [welcome(5401)]),
      ]),
    ],
    globalKeys: [],
  };
}

/** A clock that only moves when told to or when something sleeps on it (pacing and retries cost no time). */
export class FakeClock {
  constructor(public t: number) {}
  now = (): Date => new Date(this.t);
  sleep = async (ms: number): Promise<void> => {
    this.t += ms;
  };
  advance(ms: number): void {
    this.t += ms;
  }
}

/**
 * The sandbox (delivery off) behind a recorder: every call with the clock time it started at, sends per
 * recipient, an optional gate (a call that waits for the test) and failure script.
 */
export class RecordingProvider implements MessagingProvider {
  readonly kind = 'test' as const;
  readonly calls: Array<{ to: string; at: number; by: string }> = [];
  readonly perRecipient = new Map<string, number>();
  /** return a promise to hold this call (after the sandbox accepted it) */
  hold: ((request: SendTemplateRequest, n: number) => Promise<void> | undefined) | undefined;
  /** throw instead of sending */
  fail: ((request: SendTemplateRequest, attempt: number) => Error | undefined) | undefined;
  private readonly attempts = new Map<string, number>();

  constructor(
    readonly sandbox: SandboxProvider,
    private readonly clock: () => Date,
    private readonly label = 'p',
  ) {}

  /** another recorder sharing this one's books (a second dispatcher's provider) */
  sibling(label: string): RecordingProvider {
    const p = new RecordingProvider(this.sandbox, this.clock, label);
    (p as { calls: unknown }).calls = this.calls;
    (p as { perRecipient: unknown }).perRecipient = this.perRecipient;
    p.hold = this.hold;
    p.fail = this.fail;
    return p;
  }

  async sendTemplate(request: SendTemplateRequest): Promise<SendTemplateResult> {
    const attempt = (this.attempts.get(request.to) ?? 0) + 1;
    this.attempts.set(request.to, attempt);
    this.calls.push({ to: request.to, at: this.clock().getTime(), by: this.label });
    const failure = this.fail?.(request, attempt);
    if (failure) throw failure;
    const result = await this.sandbox.sendTemplate(request);
    this.perRecipient.set(request.to, (this.perRecipient.get(request.to) ?? 0) + 1);
    const held = this.hold?.(request, this.calls.length);
    if (held) await held;
    return result;
  }
}

export const sandbox = () => new SandboxProvider({ delivery: 'off' });

export const phones = (n: number, prefix = '+54911600'): string[] =>
  Array.from({ length: n }, (_, i) => `${prefix}${String(i + 1).padStart(5, '0')}`);

export async function waitForBulk(
  pool: Pool,
  companyId: number,
  bulkId: string,
  done: (b: BulkSendRow) => boolean,
  timeoutMs = 30_000,
): Promise<BulkSendRow> {
  const deadline = Date.now() + timeoutMs;
  let last: BulkSendRow | undefined;
  for (;;) {
    last = await getBulkSend(pool, companyId, bulkId);
    if (last && done(last)) return last;
    if (Date.now() > deadline) throw new Error(`bulk ${bulkId} did not reach the expected state: ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Outcome events per recipient index of a bulk (every recipient must have exactly one). */
export async function outcomeCounts(pool: Pool, bulkId: string): Promise<Map<number, string[]>> {
  const r = await pool.query<{ idx: number; type: string }>(
    `SELECT (r->>'index')::int AS idx, e.type FROM es.events e, jsonb_array_elements(e.data->'recipients') r
      WHERE e.stream_id LIKE $1 AND e.type IN ('BulkRecipientsDispatched', 'BulkRecipientsRejected')`,
    [`bulkchunk-${bulkId}-%`],
  );
  const m = new Map<number, string[]>();
  for (const row of r.rows) m.set(row.idx, [...(m.get(row.idx) ?? []), row.type]);
  return m;
}

/** The bulk's counters recomputed from its message rows (must equal the stored counters at every moment). */
export async function countersFromRows(pool: Pool, bulkId: string) {
  const r = await pool.query(
    `SELECT count(*) FILTER (WHERE status = 'pending')::int AS pending_count,
            count(*) FILTER (WHERE accepted_at IS NOT NULL)::int AS sent_count,
            count(*) FILTER (WHERE delivered_at IS NOT NULL)::int AS delivered_count,
            count(*) FILTER (WHERE read_at IS NOT NULL)::int AS read_count,
            count(*) FILTER (WHERE status = 'failed')::int AS failed_count
       FROM rm_bulk.messages WHERE bulk_id = $1`,
    [bulkId],
  );
  return r.rows[0];
}

export async function storedCounters(pool: Pool, bulkId: string) {
  const r = await pool.query(
    'SELECT pending_count, sent_count, delivered_count, read_count, failed_count FROM rm_bulk.bulk_sends WHERE bulk_id = $1',
    [bulkId],
  );
  return r.rows[0];
}

/**
 * The lease sweep run now by the test: sweepBulkLeases skips a run while another holds its lock (the app's own
 * bulk-lease cron runs every 15 s beside the suites that start workers; under load a CI run met it), so it is run
 * again until it ran.
 */
export async function sweepBulkLeasesNow(services: Services, options: SweepOptions = {}): Promise<SweepReport> {
  for (let tries = 1; ; tries++) {
    const report = await sweepBulkLeases(services, options);
    if (!report.skipped) return report;
    if (tries >= 200) throw new Error('the bulk lease sweep was skipped 200 times: its lock stays held');
    await new Promise((r) => setTimeout(r, 50));
  }
}
