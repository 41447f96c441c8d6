import type { FastifyInstance } from 'fastify';
import { SandboxProvider } from '../../src/adapters/provider/sandbox';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { keyedSendId } from '../../src/commands/send/keyed';
import type { MessagingProvider, SendTemplateRequest, SendTemplateResult } from '../../src/ports/provider';
import { KEY_TTL_MS } from '../../src/shared/idempotency-key';
import { eventsOf, SHOP, sendsFixture, waitUntil } from '../support/sends';
import { createTestApp } from '../support/services';
import { anotherServeProcess } from '../support/another-process';

// Clocks of several processes (docs/reliability.md, 2026-11-28): a keyed single send keeps its key in its stream, and
// a repeat judged the first request's `requestedAt` (written with the first process's clock) by its own clock. A
// repeat on a process ahead by more than the in-flight time (15 s) answered 503 SEND_OUTCOME_UNKNOWN instead of
// waiting and 409 (left so: never a second provider call), ahead by more than 600 s it recorded a live send
// interrupted, and ahead by the key's 24 h it ran the repeat as the key's next use: a second message to the customer.
// The last two are now judged by the earlier of the repeat's clock and Postgres's. Two app instances on one database,
// each with its own clock; one provider double behind both.

const SEND = '/api/v1/platform-templates/send/';

/** The sandbox's answers; a call to a recipient in `held` waits until released. Counts the calls per recipient. */
class HeldProvider implements MessagingProvider {
  readonly kind = 'test' as const;
  readonly calls: string[] = [];
  private readonly sandbox = new SandboxProvider({ delivery: 'off' });
  private readonly held = new Map<string, { release: () => void; done: Promise<void> }>();
  hold(to: string): () => void {
    let release!: () => void;
    const done = new Promise<void>((resolve) => (release = resolve));
    this.held.set(to, { release, done });
    return release;
  }
  callsTo = (to: string) => this.calls.filter((c) => c === to).length;
  async sendTemplate(request: SendTemplateRequest): Promise<SendTemplateResult> {
    this.calls.push(request.to);
    await this.held.get(request.to)?.done;
    return this.sandbox.sendTemplate(request);
  }
}

/** Another `serve` process on the same database, with its own clock and provider. */
const otherProcess = (url: string, now: () => Date, provider: MessagingProvider) => anotherServeProcess(url, { now, provider });

jest.setTimeout(60_000);

describe('clock skew: keyed single sends across processes', () => {
  const provider = new HeldProvider();
  let aheadOfA = 0; // process A's clock less the host's
  let aheadOfB = 0; // process B's
  let a: Awaited<ReturnType<typeof createTestApp>>;
  let b: Awaited<ReturnType<typeof otherProcess>>;

  beforeAll(async () => {
    a = await createTestApp({ now: () => new Date(Date.now() + aheadOfA), provider });
    await seedFixture(a.services, sendsFixture(), { actor: 'test' });
    b = await otherProcess(a.db.url, () => new Date(Date.now() + aheadOfB), provider);
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  const send = (app: FastifyInstance, key: string, to: string) =>
    app.inject({
      method: 'POST', url: SEND, headers: { 'x-api-key': SHOP.key, 'idempotency-key': key },
      payload: { phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', recipient_phone: to },
    });
  const streamOf = (key: string, attempt = 0) => `send-${keyedSendId(SHOP.companyId, key, attempt)}`;

  /** A's send is held at the provider; B, `ahead` ms ahead of A and of Postgres, repeats it; B's answer is returned. */
  async function repeatWhileInFlight(key: string, to: string, ahead: number) {
    aheadOfA = 0;
    aheadOfB = ahead;
    const release = provider.hold(to);
    try {
      const first = send(a.app, key, to);
      await waitUntil(async () => provider.callsTo(to) === 1, 20_000, "A's send at the provider");
      const repeat = await send(b.app, key, to);
      release();
      const firstAnswer = await first;
      expect(firstAnswer.statusCode).toBe(200);
      // the live send's stream holds its request and its acceptance, nothing recorded by the repeat
      expect((await eventsOf(a.db.pool, streamOf(key))).map((e) => e.type)).toEqual(['TemplateSendRequested', 'TemplateSendAccepted']);
      // once A answered, B replays A's answer; the provider was called once
      const again = await send(b.app, key, to);
      expect({ status: again.statusCode, replayed: again.headers['idempotent-replayed'], body: again.json() })
        .toEqual({ status: 200, replayed: 'true', body: firstAnswer.json() });
      expect(provider.callsTo(to)).toBe(1);
      return repeat;
    } finally {
      release();
    }
  }

  const outcomeUnknown = {
    status: 503, body: { error: 'The first attempt with this Idempotency-Key reached the provider but its outcome is not known yet; retry later.' },
  };

  // not fixed, on purpose: the in-flight window (15 s) is judged by the repeat's clock alone (docs/reliability.md)
  it('a repeat on a process 20 s ahead answers 503 SEND_OUTCOME_UNKNOWN early, and never calls the provider again', async () => {
    const repeat = await repeatWhileInFlight('skew-send-1', '+5491166078001', 20_000);
    expect({ status: repeat.statusCode, body: repeat.json() }).toEqual(outcomeUnknown);
  });

  it('a repeat on a process 700 s ahead does not record the live send interrupted (503, not 422 SEND_INTERRUPTED)', async () => {
    const repeat = await repeatWhileInFlight('skew-send-2', '+5491166078002', 700_000);
    expect({ status: repeat.statusCode, body: repeat.json() }).toEqual(outcomeUnknown);
  });

  it("a repeat on a process a day ahead replays the key's first answer: no second message", async () => {
    const key = 'skew-send-3';
    const to = '+5491166078003';
    aheadOfA = 0;
    aheadOfB = KEY_TTL_MS + 60_000;
    const first = await send(a.app, key, to);
    expect(first.statusCode).toBe(200);
    const repeat = await send(b.app, key, to);
    expect({ status: repeat.statusCode, replayed: repeat.headers['idempotent-replayed'], body: repeat.json() })
      .toEqual({ status: 200, replayed: 'true', body: first.json() });
    expect(provider.callsTo(to)).toBe(1);
    expect(await eventsOf(a.db.pool, streamOf(key, 1))).toEqual([]);
  });

  it("a key whose 24 h passed by both clocks runs as the key's next use, as before", async () => {
    const key = 'skew-send-4';
    const to = '+5491166078004';
    aheadOfA = -(KEY_TTL_MS + 60_000); // the first use, a day and a minute ago
    aheadOfB = 0;
    const first = await send(a.app, key, to);
    expect(first.statusCode).toBe(200);
    const next = await send(b.app, key, to);
    expect(next.statusCode).toBe(200);
    expect(next.headers['idempotent-replayed']).toBeUndefined();
    expect(next.json().message_id).not.toBe(first.json().message_id);
    expect(provider.callsTo(to)).toBe(2);
    expect((await eventsOf(a.db.pool, streamOf(key, 1))).map((e) => e.type)).toEqual(['TemplateSendRequested', 'TemplateSendAccepted']);
  });
});
