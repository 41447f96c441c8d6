import { seedFixture } from '../../src/commands/provisioning/seed';
import { sendStreamId } from '../../src/commands/send/decider';
import { keyedSendId } from '../../src/commands/send/keyed';
import { signWebhook } from '../../src/shared/provider-webhook';
import { APP_SECRET, SHOP, sendsFixture, statusBody } from '../support/sends';
import { countEvents, type FaultApp, startFaultApp } from './review13-pgfault-harness';

// a command whose database connection failed once its handler ran: 500, its outcome unknown (review 16c, docs/conventions.md)
const OUTCOME_UNKNOWN = /^the database became unavailable while the request ran, after it may have made changes: its outcome is unknown\. /;

// Review 13: single sends (POST /api/v1/platform-templates/send/, keyed and unkeyed) while the app's Postgres
// connections are terminated, blocked or all taken. The provider double accepts every message (the sandbox) and
// can run the fault while its call is in flight.

const SEND = '/api/v1/platform-templates/send/';

describe('review 13: single send under Postgres connection faults', () => {
  let t: FaultApp;
  let offsetMs = 0;
  let n = 0;
  const recipient = () => `+54911700${String(++n).padStart(5, '0')}`;
  const body = (to: string) => ({ phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', language: 'es', recipient_phone: to });
  const send = (to: string, key?: string) =>
    t.http('POST', SEND, { key: SHOP.key, body: body(to), headers: key ? { 'idempotency-key': key } : {} });
  const messageStatus = (id: string) => t.http('GET', `/api/v1/platform-templates/messages/${encodeURIComponent(id)}/`, { key: SHOP.key });
  const postStatus = (payload: object) => {
    const raw = JSON.stringify(payload);
    return t.http('POST', '/webhooks/provider', { headers: { 'content-type': 'application/json', 'x-hub-signature-256': signWebhook(APP_SECRET, raw) }, body: payload });
  };

  /** While the provider call is in flight: hold the event store's INSERT, kill the app backend waiting on it, let go. */
  const killTheAnswersAppend = () => {
    t.provider.during = async () => {
      t.provider.during = undefined;
      const events = await t.lock('es.events', 'SHARE');
      void (async () => {
        const pids = await t.waitBlocked('%', 'store');
        await t.admin.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [pids]);
        await events.release();
      })();
    };
  };

  beforeAll(async () => {
    t = await startFaultApp({ now: () => new Date(Date.now() + offsetMs) });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });
  afterEach(() => {
    t.provider.during = undefined;
    expect(t.unhandled).toEqual([]);
  });

  it('keyed: the answer lost with its connection after the provider accepted is never sent twice, and the provider status completes it', async () => {
    const to = recipient();
    const key = `lost-answer-${to}`;
    killTheAnswersAppend();
    const first = await send(to, key);
    expect({ status: first.status, body: first.body }).toEqual({ status: 500, body: { error: expect.stringMatching(OUTCOME_UNKNOWN) } });
    const accepted = t.provider.accepted.find((a) => a.to === to)!;

    // past the request's in-flight window (15 s): the outcome is unknown, said as such, and the provider is not called again
    offsetMs += 16_000;
    const unknown = await send(to, key);
    expect({ status: unknown.status, retryAfter: unknown.headers.get('retry-after'), body: unknown.body }).toEqual({
      status: 503, retryAfter: '5',
      body: { error: 'The first attempt with this Idempotency-Key reached the provider but its outcome is not known yet; retry later.' },
    });

    // the provider's first status names the send (its client reference): the acceptance is recorded from it
    const sendId = keyedSendId(SHOP.companyId, key, 0);
    const webhook = await postStatus(statusBody(SHOP.number.phoneNumberId, accepted.providerMessageId, 'delivered', new Date().toISOString(), { clientReference: sendId }));
    expect(webhook.status).toBe(200);
    const again = await send(to, key);
    expect({ status: again.status, replayed: again.headers.get('idempotent-replayed'), messageId: again.body.message_id })
      .toEqual({ status: 200, replayed: 'true', messageId: accepted.providerMessageId });
    expect(t.provider.callsTo(to)).toBe(1);
    expect(await countEvents(t.db.pool, 'TemplateSendRequested', sendStreamId(sendId))).toBe(1);
    expect(await countEvents(t.db.pool, 'TemplateSendAccepted', sendStreamId(sendId))).toBe(1);
    expect((await messageStatus(accepted.providerMessageId)).body.delivery_status.current).toBe('delivered');
  });

  it('keyed: the durable intent killed mid-append answers a clean 500 before the provider is called; the retry sends once', async () => {
    const to = recipient();
    const key = `lost-intent-${to}`;
    const events = await t.lock('es.events', 'SHARE');
    const pending = send(to, key);
    const pids = await t.waitBlocked('%', 'store');
    await t.admin.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [pids]);
    await events.release();
    const first = await pending;
    expect({ status: first.status, body: first.body }).toEqual({ status: 500, body: { error: expect.stringMatching(OUTCOME_UNKNOWN) } });
    expect(t.provider.callsTo(to)).toBe(0);
    const again = await send(to, key);
    expect(again.status).toBe(200);
    expect((await send(to, key)).body).toEqual(again.body);
    expect(t.provider.callsTo(to)).toBe(1);
  });

  it('keyed: the event store pool all taken answers a clean 500 before the provider is called; the retry sends once', async () => {
    const to = recipient();
    const key = `exhausted-${to}`;
    // every connection of the event store's pool held: the request's durable intent cannot be appended
    const held = await Promise.all(Array.from({ length: 16 }, () => t.pools.store.connect()));
    let first;
    try {
      first = await send(to, key);
    } finally {
      for (const c of held) c.release();
    }
    expect({ status: first.status, body: first.body }).toEqual({ status: 500, body: { error: expect.stringMatching(OUTCOME_UNKNOWN) } });
    expect(t.provider.callsTo(to)).toBe(0);
    const again = await send(to, key);
    expect(again.status).toBe(200);
    expect(t.provider.callsTo(to)).toBe(1);
    expect((await messageStatus(again.body.message_id)).status).toBe(200);
  });

  it('unkeyed: a statement held behind a lock while the provider call is in flight answers once the lock goes: one call, one record', async () => {
    const to = recipient();
    let release: () => Promise<void> = async () => undefined;
    t.provider.during = async () => {
      t.provider.during = undefined;
      release = (await t.lock('es.events', 'SHARE')).release;
    };
    let answered = false;
    const pending = send(to).finally(() => (answered = true));
    await t.waitBlocked('%', 'store');
    await new Promise((r) => setTimeout(r, 1_000));
    expect(answered).toBe(false); // no statement timeout: the request waits for the lock (see the review's report)
    await release();
    const res = await pending;
    expect(res.status).toBe(200);
    expect(t.provider.callsTo(to)).toBe(1);
    expect((await messageStatus(res.body.message_id)).status).toBe(200);
  });

  it('every app connection terminated between requests: the next send is answered 200 and readable at once', async () => {
    // the pools see their connections end (a fixed 200-ms pause raced the backends' exit under load: a pooled
    // connection still taken for alive answers 503, as it should, docs/conventions.md)
    expect(await t.terminateAndWaitForPools()).toBeGreaterThan(0);
    const to = recipient();
    const res = await send(to);
    expect(res.status).toBe(200);
    expect((await messageStatus(res.body.message_id)).status).toBe(200);
  });

  // Fixed 2026-11-28 (review 13; src/commands/send/handler.ts, docs/sends.md): after the provider accepted an unkeyed
  // send, a failure of the one append that records the request and its answer (a connection terminated under it, or a
  // pooled connection that died while the provider call was in flight) answered 500 and recorded nothing: the message
  // the customer got was in no status record, no quota and no chat history, and its statuses were dead-lettered. The
  // append is now tried again (after 50 and 250 ms) when its connection was lost; its event ids are deterministic, so
  // a committed first try is recognised, never stored twice.
  const expectRecordedOnce = async (res: { status: number; body: any }, to: string) => {
    const accepted = t.provider.accepted.find((a) => a.to === to)!;
    expect(t.provider.callsTo(to)).toBe(1);
    expect({ status: res.status, messageId: res.body?.message_id }).toEqual({ status: 200, messageId: accepted.providerMessageId });
    // the status record is readable at once (read-your-writes), and the log holds the request, the answer and the
    // chat history's outbound message once each
    const record = await messageStatus(accepted.providerMessageId);
    expect({ status: record.status, current: record.body?.delivery_status?.current }).toEqual({ status: 200, current: 'sent' });
    const stream = (await t.db.pool.query<{ stream_id: string }>(
      `SELECT stream_id FROM es.events WHERE type = 'TemplateSendAccepted' AND data->>'providerMessageId' = $1`, [accepted.providerMessageId])).rows;
    expect(stream).toHaveLength(1);
    expect(await countEvents(t.db.pool, 'TemplateSendRequested', stream[0].stream_id)).toBe(1);
    const outbound = await t.db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM es.events WHERE type = 'MessageRecorded' AND data->>'messageId' = $1`, [accepted.providerMessageId]);
    expect(outbound.rows[0].n).toBe(1);
  };

  it('unkeyed: the answer append killed after the provider accepted still records the acceptance', async () => {
    const to = recipient();
    killTheAnswersAppend();
    const res = await send(to);
    await expectRecordedOnce(res, to);
    expect(t.logs.some((l) => l.msg === 'appending the accepted send failed (connection lost); trying again')).toBe(true);
  });

  // The reviewer's other case. Here the pool had mostly dropped its dead idle connections before the append took one
  // (it passed without the fix on the 2026-11-28 run): kept as a check of the answer and the record, not as the
  // regression test (the one above is).
  it('unkeyed: every app connection terminated while the provider call is in flight: the acceptance is recorded, 200', async () => {
    const to = recipient();
    t.provider.during = async () => {
      t.provider.during = undefined;
      expect(await t.terminate()).toBeGreaterThan(0);
    };
    const res = await send(to);
    await expectRecordedOnce(res, to);
  });
});
