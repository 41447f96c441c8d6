import { eventually } from '../support/sends';
import { sendsFixture, SHOP } from '../support/sends';
import { call, startCluster, type Cluster, type ServeProcess } from '../support/multi-process';

// Review 15a: two `serve` processes wired as main.ts wires them (own pools, projection runner, workers, caches) on one
// database, requests alternating between them over real HTTP, as behind a load balancer: a write answered by A, then
// the matching read on B at once. Reads that are not cached (messages, bulk sends, webhook endpoints) see the write
// at once; cached ones (contact lookup and get, business-accounts) see it when B's LISTEN connection brings the
// change notification: B's notification is held back here by a proxy in front of B's database (the documented
// window, docs/core.md "HTTP", 2026-11-28), and released.

const SEND = '/api/v1/platform-templates/send/';
const BULK = '/api/v1/platform-templates';
const LOOKUP = (phone: string) => `/api/v1/contact-lookup/?phone=${encodeURIComponent(phone)}`;
const GET_CONTACT = (phone: string) => `/api/v1/external/contacts/?phone=${encodeURIComponent(phone)}`;
const UPSERT = '/api/v1/external/contacts/upsert/';
const HOOKS = '/api/v1/webhook-endpoints/';
const ACCOUNTS = '/api/v1/business-accounts/';

describe('review 15a: read-your-writes across serve processes', () => {
  let c: Cluster;
  let A: ServeProcess;
  let B: ServeProcess;

  beforeAll(async () => {
    c = await startCluster(['A', 'B'], { proxied: ['B'], env: { WEBHOOKS_ALLOW_HTTP: 'true', WEBHOOKS_ALLOW_PRIVATE_URLS: 'true' } });
    [A, B] = c.processes;
    const { seedFixture } = A.load('../../src/commands/provisioning/seed');
    await seedFixture(A.runtime.services, sendsFixture(), { actor: 'test' });
  }, 120_000);
  afterEach(() => c.proxies.get('B')!.release());
  /**
   * `run` while A's runner applies every projection: a process whose runner applied a change marks it and bypasses
   * its cache for a moment (exact at once), so B's runner is stopped, as when A holds the projections' locks.
   */
  const whileAApplies = async (run: () => Promise<void>) => {
    await B.runtime.services.runner.stop();
    try {
      await run();
    } finally {
      c.proxies.get('B')!.release();
      await B.runtime.services.runner.start();
    }
  };
  afterAll(async () => {
    await c?.close();
  });

  const lookupOn = async (p: ServeProcess, phone: string) => (await call(p, 'GET', LOOKUP(phone), { key: SHOP.key })).body.found;
  const nameOn = async (p: ServeProcess, phone: string) => (await call(p, 'GET', GET_CONTACT(phone), { key: SHOP.key })).body.contact?.full_name ?? null;
  const quotaOn = async (p: ServeProcess, phoneNumberId = SHOP.number.phoneNumberId) => {
    const res = await call(p, 'GET', ACCOUNTS, { key: SHOP.key });
    return res.body.phoneNumbers.find((n: any) => n.phoneNumberId === phoneNumberId).quota.uniqueNumbersSent24h;
  };
  const send = (p: ServeProcess, recipient: string) => call(p, 'POST', SEND, {
    key: SHOP.key,
    body: { phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', language: 'es', recipient_phone: recipient },
  });

  it('the harness: B reaches the database through the proxy, with its LISTEN connections (keys, contacts, reads, ...)', () => {
    expect(c.proxies.get('B')!.listeners).toBeGreaterThanOrEqual(3);
  });

  it('a send answered by A is readable on B at once (the message is not cached)', async () => {
    for (let i = 0; i < 10; i++) {
      const sent = await send(A, `+549117701${String(i).padStart(3, '0')}1`);
      expect(sent.status).toBe(200);
      const read = await call(B, 'GET', `/api/v1/platform-templates/messages/${sent.body.message_id}/`, { key: SHOP.key });
      expect([read.status, read.body.meta_message_id, read.body.delivery_status?.current]).toEqual([200, sent.body.message_id, 'sent']);
    }
  });

  it('webhook endpoints created, patched and deleted on A are seen so on B at once', async () => {
    for (let i = 0; i < 5; i++) {
      const created = await call(A, 'POST', HOOKS, { key: SHOP.key, body: { url: `http://127.0.0.1:9/in${i}`, event_types: ['message.delivered'] } });
      expect(created.status).toBe(201);
      const id = created.body.id;
      expect((await call(B, 'GET', `${HOOKS}${id}/`, { key: SHOP.key })).status).toBe(200);
      expect(JSON.stringify((await call(B, 'GET', HOOKS, { key: SHOP.key })).body)).toContain(id);
      const patched = await call(A, 'PATCH', `${HOOKS}${id}/`, { key: SHOP.key, body: { description: `d${i}`, enabled: false } });
      expect(patched.status).toBe(200);
      const onB = await call(B, 'GET', `${HOOKS}${id}/`, { key: SHOP.key });
      expect([onB.body.description, onB.body.enabled]).toEqual([`d${i}`, false]);
      expect((await call(A, 'DELETE', `${HOOKS}${id}/`, { key: SHOP.key })).status).toBeLessThan(300);
      expect((await call(B, 'GET', `${HOOKS}${id}/`, { key: SHOP.key })).status).toBe(404);
      expect(JSON.stringify((await call(B, 'GET', HOOKS, { key: SHOP.key })).body)).not.toContain(id);
    }
  });

  it('a bulk send created on A is on B at once, and its cancel on B is seen on A at once', async () => {
    const recipients = Array.from({ length: 30 }, (_, i) => ({ phone: `+549117802${String(i).padStart(3, '0')}1` }));
    const created = await call(A, 'POST', `${BULK}/send-bulk/`, {
      key: SHOP.key, body: { phone_number_id: SHOP.smallNumber.phoneNumberId, template_name: 'welcome', language: 'es', recipients },
    });
    expect(created.status).toBe(202);
    const id = created.body.bulk_send_id;
    expect((await call(B, 'GET', `${BULK}/bulk-sends/${id}/`, { key: SHOP.key })).status).toBe(200);
    expect(JSON.stringify((await call(B, 'GET', `${BULK}/bulk-sends/`, { key: SHOP.key })).body)).toContain(id);
    const cancelled = await call(B, 'POST', `${BULK}/bulk-sends/${id}/cancel/`, { key: SHOP.key });
    expect([cancelled.status, cancelled.body.status]).toEqual([200, 'CANCELLED']);
    expect((await call(A, 'GET', `${BULK}/bulk-sends/${id}/`, { key: SHOP.key })).body.status).toBe('CANCELLED');
    expect((await call(A, 'POST', `${BULK}/bulk-sends/${id}/cancel/`, { key: SHOP.key })).status).toBe(409);
  });

  it('a contact B read as missing and A then created: B answers "not found" at most while its notification is in flight', () => whileAApplies(async () => {
    const proxy = c.proxies.get('B')!;
    const phone = '+5491166012345';
    expect(await lookupOn(B, phone)).toBe(false);
    expect(await nameOn(B, phone)).toBeNull();
    proxy.hold();
    expect((await call(A, 'POST', UPSERT, { key: SHOP.key, body: { phone, full_name: 'Held' } })).status).toBe(201);
    expect(await lookupOn(A, phone)).toBe(true);
    // B may answer its cached "not found" while the notification that drops it is held (documented), or already the
    // contact when its cache was bypassed (an entry marked changing by an earlier notification): never anything else
    expect([false, true]).toContain(await lookupOn(B, phone));
    expect([null, 'Held']).toContain(await nameOn(B, phone));
    proxy.release();
    expect(await eventually(() => lookupOn(B, phone), true)).toBe(true);
    expect(await nameOn(B, phone)).toBe('Held');
  }));

  it('business-accounts on B shows a send of A once its notification arrives (held: the previous count, or the new)', () => whileAApplies(async () => {
    const proxy = c.proxies.get('B')!;
    const before = await quotaOn(B);
    proxy.hold();
    expect((await send(A, '+5491177099991')).status).toBe(200);
    expect(await quotaOn(A)).toBe(before + 1);
    // the previous count while B's notification is held (documented), or already the new one when B's cache was
    // bypassed (an entry marked changing: seen once in a CI run): never anything else
    expect([before, before + 1]).toContain(await quotaOn(B));
    proxy.release();
    expect(await eventually(() => quotaOn(B), before + 1)).toBe(before + 1);
  }));

  it('without a held notification, B catches up with A\'s writes on the cached reads (contacts, quota)', async () => {
    for (let i = 0; i < 20; i++) {
      const phone = `+54911660${String(i).padStart(5, '0')}`;
      expect(await lookupOn(B, phone)).toBe(false);
      expect(await nameOn(B, phone)).toBeNull();
      expect((await call(A, 'POST', UPSERT, { key: SHOP.key, body: { phone, full_name: `C ${i}` } })).status).toBe(201);
      expect(await eventually(() => lookupOn(B, phone), true)).toBe(true);
      expect(await eventually(() => nameOn(B, phone), `C ${i}`)).toBe(`C ${i}`);
      expect((await call(B, 'POST', UPSERT, { key: SHOP.key, body: { phone, full_name: `D ${i}` } })).status).toBe(200);
      expect(await eventually(() => nameOn(A, phone), `D ${i}`)).toBe(`D ${i}`);
    }
    const before = await quotaOn(B);
    expect((await send(A, '+5491177088881')).status).toBe(200);
    expect(await eventually(() => quotaOn(B), before + 1)).toBe(before + 1);
  });
});
