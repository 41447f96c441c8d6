import { startCli } from '../support/cli-process';
import { eventually, sendsFixture, SHOP } from '../support/sends';
import { call, MP_ANON_SECRET, MP_PEPPER, startCluster, type Cluster } from '../support/multi-process';

// Review 15a: `projections rebuild contacts` (the CLI, a third process) while two `serve` processes take writes and
// reads alternately: no request fails, each answer on either process is the write just answered, and afterwards
// both processes answer the same as the rebuilt tables.

const LOOKUP = (phone: string) => `/api/v1/contact-lookup/?phone=${encodeURIComponent(phone)}`;
const GET_CONTACT = (phone: string) => `/api/v1/external/contacts/?phone=${encodeURIComponent(phone)}`;
const UPSERT = '/api/v1/external/contacts/upsert/';

describe('review 15a: a projection rebuild while two serve processes run', () => {
  let c: Cluster;

  beforeAll(async () => {
    c = await startCluster(['A', 'B']);
    const { seedFixture } = c.processes[0].load('../../src/commands/provisioning/seed');
    await seedFixture(c.processes[0].runtime.services, sendsFixture(), { actor: 'test' });
  }, 120_000);
  afterAll(async () => {
    await c?.close();
  });

  it('contacts rebuilt by the CLI: writes and reads on A and B go on, and both agree afterwards', async () => {
    const [A, B] = c.processes;
    const phones: string[] = [];
    for (let i = 0; i < 300; i++) {
      const phone = `+54911550${String(i).padStart(5, '0')}`;
      phones.push(phone);
      expect((await call(i % 2 ? A : B, 'POST', UPSERT, { key: SHOP.key, body: { phone, full_name: `R ${i}` } })).status).toBe(201);
    }
    const env = { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'silent', DATABASE_URL: c.db.url, ANONYMIZATION_SECRET: MP_ANON_SECRET, API_KEY_PEPPER: MP_PEPPER };
    const rebuild = startCli(['projections', 'rebuild', 'contacts'], env);
    const failures: string[] = [];
    let round = 0;
    try {
      do {
        const phone = `+54911551${String(round).padStart(5, '0')}`;
        phones.push(phone);
        const [w, r] = round % 2 ? [A, B] : [B, A];
        const up = await call(w, 'POST', UPSERT, { key: SHOP.key, body: { phone, full_name: `W ${round}` } });
        if (up.status !== 201) failures.push(`upsert ${phone} on ${w.name}: ${up.status} ${JSON.stringify(up.body)}`);
        const old = phones[round % 300];
        for (const p of [A, B]) {
          const got = await call(p, 'GET', GET_CONTACT(old), { key: SHOP.key });
          if (got.status !== 200 || got.body.contact?.full_name !== `R ${round % 300}`) failures.push(`get ${old} on ${p.name}: ${got.status} ${JSON.stringify(got.body)}`);
        }
        // the writer's own read: read-your-writes in the process that answered the write
        const mine = await call(w, 'GET', LOOKUP(phone), { key: SHOP.key });
        if (mine.status !== 200 || !mine.body.found) failures.push(`lookup ${phone} on ${w.name} after its upsert: ${mine.status} ${JSON.stringify(mine.body)}`);
        const other = await eventually(async () => (await call(r, 'GET', LOOKUP(phone), { key: SHOP.key })).body.found, true);
        if (!other) failures.push(`lookup ${phone} on ${r.name}: not found`);
        round++;
      } while (rebuild.child.exitCode === null && round < 2000);
      expect((await rebuild.exited).code).toBe(0);
    } finally {
      await rebuild.kill();
    }
    expect(failures).toEqual([]);
    expect(round).toBeGreaterThan(0);
    for (const phone of phones) {
      const [a, b] = [await call(A, 'GET', GET_CONTACT(phone), { key: SHOP.key }), await call(B, 'GET', GET_CONTACT(phone), { key: SHOP.key })];
      expect([a.status, a.body.found]).toEqual([200, true]);
      expect(b.body).toEqual(a.body);
    }
  }, 240_000);
});
