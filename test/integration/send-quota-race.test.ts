import pino from 'pino';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { SandboxProvider } from '../../src/adapters/provider/sandbox';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { QuotaHolds, SendQuotaGate } from '../../src/commands/send/quota-gate';
import { uniqueRecipientsSent24h } from '../../src/projections/accounts/queries';
import type { MessagingProvider, SendTemplateRequest, SendTemplateResult } from '../../src/ports/provider';
import { createTestApp } from '../support/services';
import { SHOP, sendsFixture } from '../support/sends';
import { anotherServeProcess } from '../support/another-process';

// Concurrent single sends near a number's daily quota (docs/sends.md, "Quota gate"): at most the remaining number of
// new unique recipients are sent to, whatever the concurrency, within one process and across processes sharing the
// database; a recipient already in the window still goes; the refusal is the usual 429.

const NOW = '2026-03-01T10:00:00.000Z';
const SEND = '/api/v1/platform-templates/send/';
const LIMIT = 50; // TIER_50

/** A provider double that can hold its calls (so that concurrent sends are all in flight at once) and records them. */
class HoldingProvider implements MessagingProvider {
  readonly kind = 'test' as const;
  /** recipients the provider was asked to message, per phone number id */
  readonly recipients = new Map<string, string[]>();
  held = 0;
  onCall: (() => void) | undefined;
  private gate: Promise<void> | undefined;
  private readonly sandbox = new SandboxProvider({ delivery: 'off' });

  async sendTemplate(request: SendTemplateRequest): Promise<SendTemplateResult> {
    this.recipients.set(request.phoneNumberId, [...(this.recipients.get(request.phoneNumberId) ?? []), request.to]);
    if (this.gate) {
      this.held++;
      this.onCall?.();
      await this.gate;
    }
    return this.sandbox.sendTemplate(request);
  }

  hold(): () => void {
    let release!: () => void;
    this.gate = new Promise<void>((r) => (release = r));
    this.held = 0;
    return () => {
      this.gate = undefined;
      this.onCall = undefined;
      release();
    };
  }
}

type Inject = (payload: object, headers?: Record<string, string>) => Promise<LightMyRequestResponse>;

/**
 * Starts every request at once and holds the provider until each request is either at the provider or answered, so
 * every check runs while the others are in flight (no timing involved).
 */
async function burst(provider: HoldingProvider, requests: Array<() => Promise<LightMyRequestResponse>>) {
  const release = provider.hold();
  let answered = 0;
  const check = () => {
    if (provider.held + answered === requests.length) release();
  };
  provider.onCall = check;
  const responses = await Promise.all(requests.map((r) => r().then((res) => { answered++; check(); return res; })));
  release();
  return responses;
}

const statuses = (responses: LightMyRequestResponse[]) => responses.map((r) => r.statusCode).sort();
const times = (n: number, status: number) => Array<number>(n).fill(status);

const quotaRefusal = (phoneNumberId: string) => ({
  error: `Messaging quota exhausted for phone number '${phoneNumberId}': ${LIMIT} of ${LIMIT} unique recipients in the last 24 h (TIER_50).`,
});

/** TIER_50 numbers of the SHOP company, one per test, each with an approved `welcome` template. */
const NUMBERS = [41, 42, 43, 44].map((id) => ({ id, phoneNumberId: `2000000000000${id}` }));

function fixture() {
  const f = sendsFixture();
  const shop = f.companies[0];
  const small = shop.phoneNumbers[1];
  for (const n of NUMBERS) {
    shop.phoneNumbers.push({ ...small, id: n.id, phoneNumberId: n.phoneNumberId, isPrimary: false, templates: [{ ...small.templates[0], id: 4100 + n.id }] });
  }
  return f;
}

/** Another `serve` process on the same database, with its own provider and clock. */
const secondProcess = (url: string, provider: MessagingProvider, now: () => Date) => anotherServeProcess(url, { now, provider, poolSize: 20 });

// Each test first sends to ~50 new recipients one after the other, each answered once the read models have it
// (read-your-writes), and the log is read only below the cluster's oldest running transaction (test databases share
// one cluster; other suites hold transactions open): a send may then wait ~1 s, past jest's 60 s (a test timed out by
// jest goes on in the background, under the next one).
jest.setTimeout(240_000);

describe('single sends near the daily quota, concurrently', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  const clock = new Date(NOW);
  const provider = new HoldingProvider();

  beforeAll(async () => {
    t = await createTestApp({ now: () => clock, provider });
    await seedFixture(t.services, fixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });

  const injectInto = (app: FastifyInstance): Inject => (payload, headers = {}) =>
    app.inject({ method: 'POST', url: SEND, headers: { 'x-api-key': SHOP.key, ...headers }, payload });
  const send: Inject = (payload, headers) => injectInto(t.app)(payload, headers);
  const welcome = (phoneNumberId: string, recipient: string) => ({ phone_number_id: phoneNumberId, template_name: 'welcome', recipient_phone: recipient });
  // never ending in 0000 (the sandbox refuses those)
  const recipient = (n: number, i: number) => `+549116${String(n).padStart(2, '0')}${String(i).padStart(4, '0')}1`;

  /** sends to `count` new recipients one after the other (all 200) */
  async function use(n: { phoneNumberId: string; id: number }, count: number) {
    for (let i = 0; i < count; i++) expect((await send(welcome(n.phoneNumberId, recipient(n.id, i)))).statusCode).toBe(200);
  }
  const distinctSentTo = (phoneNumberId: string) => new Set(provider.recipients.get(phoneNumberId)).size;
  const reservations = async () => (await t.db.pool.query('SELECT count(*)::int AS n FROM public.send_quota_reservations')).rows[0].n;

  it('one unique recipient left: of 20 concurrent sends to new recipients exactly one goes, the rest get the usual 429; a recipient in the window still goes', async () => {
    const n = NUMBERS[0];
    await use(n, LIMIT - 1);
    const responses = await burst(provider, [
      ...Array.from({ length: 20 }, (_, i) => () => send(welcome(n.phoneNumberId, recipient(n.id, 100 + i)))),
      () => send(welcome(n.phoneNumberId, recipient(n.id, 3))), // already in the window
    ]);
    const inWindow = responses.pop()!;
    expect(inWindow.statusCode).toBe(200);
    expect(statuses(responses)).toEqual([...times(1, 200), ...times(19, 429)]);
    for (const r of responses.filter((x) => x.statusCode !== 200)) {
      expect(r.statusCode).toBe(429);
      expect(r.json()).toEqual(quotaRefusal(n.phoneNumberId));
    }
    expect(distinctSentTo(n.phoneNumberId)).toBe(LIMIT);
    expect(await uniqueRecipientsSent24h(t.db.pool, n.id, clock)).toBe(LIMIT);
    expect(await reservations()).toBe(0); // each answered send gave its reservation back
  });

  it('keyed sends (Idempotency-Key): the same bound, and the accepted key still replays at the limit', async () => {
    const n = NUMBERS[1];
    await use(n, LIMIT - 2);
    const key = (i: number) => ({ 'idempotency-key': `quota-race-${i}` });
    const responses = await burst(provider, Array.from({ length: 12 }, (_, i) => () => send(welcome(n.phoneNumberId, recipient(n.id, 100 + i)), key(i))));
    expect(statuses(responses)).toEqual([...times(2, 200), ...times(10, 429)]);
    const sent = responses.map((r, i) => [r, i] as const).filter(([r]) => r.statusCode === 200);
    for (const r of responses.filter((x) => x.statusCode !== 200)) {
      expect(r.statusCode).toBe(429);
      expect(r.json()).toEqual(quotaRefusal(n.phoneNumberId));
    }
    expect(distinctSentTo(n.phoneNumberId)).toBe(LIMIT);
    // a repeat of an accepted key answers the same message; a refused key's repeat is refused again (nothing was kept)
    const [first, i] = sent[0];
    const again = await send(welcome(n.phoneNumberId, recipient(n.id, 100 + i)), key(i));
    expect(again.statusCode).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json().message_id).toBe(first.json().message_id);
    const refusedAt = responses.findIndex((r) => r.statusCode === 429);
    const refusedAgain = await send(welcome(n.phoneNumberId, recipient(n.id, 100 + refusedAt)), key(refusedAt));
    expect(refusedAgain.statusCode).toBe(429);
    expect(distinctSentTo(n.phoneNumberId)).toBe(LIMIT);
  });

  it('two serve processes on one database: together they send to no more new recipients than remain', async () => {
    const n = NUMBERS[2];
    await use(n, LIMIT - 3);
    const other = await secondProcess(t.db.url, provider, () => clock);
    try {
      const sendThere = injectInto(other.app);
      const responses = await burst(provider, Array.from({ length: 20 }, (_, i) => {
        const payload = welcome(n.phoneNumberId, recipient(n.id, 100 + i));
        return i % 2 === 0 ? () => send(payload) : () => sendThere(payload);
      }));
      expect(statuses(responses)).toEqual([...times(3, 200), ...times(17, 429)]);
      for (const r of responses.filter((x) => x.statusCode !== 200)) {
        expect(r.statusCode).toBe(429);
        expect(r.json()).toEqual(quotaRefusal(n.phoneNumberId));
      }
      expect(distinctSentTo(n.phoneNumberId)).toBe(LIMIT);
      expect(await uniqueRecipientsSent24h(t.db.pool, n.id, clock)).toBe(LIMIT);
    } finally {
      await other.close();
    }
  });

  it('a send the provider refuses gives its room back; a reservation left by a dead process counts only until it expires', async () => {
    const n = NUMBERS[3];
    await use(n, LIMIT - 1);
    expect((await send(welcome(n.phoneNumberId, '+5491199990000'))).statusCode).toBe(422); // the sandbox refuses ...0000
    expect(await reservations()).toBe(0);
    // a process that reserved the last slot and died before answering (nothing gives its reservation back)
    const dead = new SendQuotaGate(t.db.pool, pino({ level: 'silent' }), 30_000);
    expect(await dead.admit(new QuotaHolds(dead), { numberId: n.id, tier: 'TIER_50', recipient: '+5491199990001', now: clock })).toBeUndefined();
    const refused = await send(welcome(n.phoneNumberId, recipient(n.id, 100)));
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toEqual(quotaRefusal(n.phoneNumberId));
    const start = clock.getTime();
    try {
      clock.setTime(start + 30_001);
      expect((await send(welcome(n.phoneNumberId, recipient(n.id, 100)))).statusCode).toBe(200);
      expect(await reservations()).toBe(0); // the expired one was deleted under the lock, the new one once answered
    } finally {
      clock.setTime(start);
    }
  });

  it('near the limit the locked check also counts the sends this process admitted without a reservation', async () => {
    const gate = new SendQuotaGate(t.db.pool, pino({ level: 'silent' }), 30_000, 5);
    const holds = new QuotaHolds(gate);
    const admit = (i: number) => gate.admit(holds, { numberId: 99, tier: 'TIER_50', recipient: `+54911990${String(i).padStart(4, '0')}1`, now: clock });
    const answers = await Promise.all(Array.from({ length: 60 }, (_, i) => admit(i)));
    expect(answers.filter((a) => a === undefined)).toHaveLength(LIMIT);
    expect(answers.find((a) => a !== undefined)).toEqual({ used: LIMIT, dailyLimit: LIMIT });
    expect(holds.counted).toHaveLength(LIMIT - 5); // admitted above the guard, counted in process
    expect(holds.reservations).toHaveLength(5);
    await holds.release();
    expect(await reservations()).toBe(0);
    expect(await admit(100)).toBeUndefined(); // all given back
  });
});
