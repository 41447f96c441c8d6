import { Client } from 'pg';
import type { FastifyInstance } from 'fastify';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { IdempotencyStore, KEY_TTL_MS } from '../../src/http/idempotency-store';
import { sealedBox } from '../../src/shared/sealed-box';
import { SHOP, sendsFixture, waitUntil } from '../support/sends';
import { createTestApp } from '../support/services';
import { anotherServeProcess } from '../support/another-process';

// Clocks of several processes (docs/reliability.md, 2026-11-28): an Idempotency-Key's claim is held by a lease written
// with the claiming process's clock. A second process whose clock runs more than the lease (15 s) ahead took the claim
// over while the first run was still going, and the command ran twice. The lease now lapses only when both the claimer's
// clock and Postgres's have passed it. Two app instances on one database, process B's clock 20 s ahead of A's.

const UPSERT = '/api/v1/external/contacts/upsert/';
const AHEAD_MS = 20_000;

/** Another `serve` process on the same database, with its own clock. */
const otherProcess = (url: string, now: () => Date) => anotherServeProcess(url, { now });

jest.setTimeout(60_000);

describe('clock skew: Idempotency-Key claims across processes', () => {
  let a: Awaited<ReturnType<typeof createTestApp>>;
  let b: Awaited<ReturnType<typeof otherProcess>>;

  beforeAll(async () => {
    a = await createTestApp({ now: () => new Date() });
    await seedFixture(a.services, sendsFixture(), { actor: 'test' });
    b = await otherProcess(a.db.url, () => new Date(Date.now() + AHEAD_MS));
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  const upsert = (app: FastifyInstance, key: string, body: object) =>
    app.inject({ method: 'POST', url: UPSERT, headers: { 'x-api-key': SHOP.key, 'idempotency-key': key }, payload: body });

  /** backends of this database waiting for a lock */
  const waiting = async () =>
    (await a.db.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)).rows[0].n as number;

  const claimedByB = async (key: string) =>
    (await a.db.pool.query(`SELECT created_at > now() + interval '10 seconds' AS b FROM public.idempotency_keys WHERE key = $1`, [key])).rows[0]?.b === true;

  it("a repeat on a process 20 s ahead waits for the first run in flight (409), it does not run the command a second time", async () => {
    const key = 'skew-upsert-1';
    const body = { phone: '+5491166077001', full_name: 'Skewed Clock' };
    // A's run is held at its append (after its claim): the event table is locked against writes
    const lock = new Client({ connectionString: a.db.url });
    await lock.connect();
    let released = false;
    const release = async () => {
      if (released) return;
      released = true;
      await lock.query('ROLLBACK');
      await lock.end();
    };
    try {
      await lock.query('BEGIN');
      await lock.query('LOCK TABLE es.events IN SHARE MODE');
      const first = upsert(a.app, key, body);
      await waitUntil(async () => (await waiting()) >= 1, 20_000, "A's upsert held at its append");
      let repeatDone = false;
      const repeat = upsert(b.app, key, body).finally(() => (repeatDone = true));
      // B answers 409 after its wait (fixed), or takes the claim over (the record's claim time is then B's) and runs
      await waitUntil(async () => repeatDone || (await claimedByB(key)), 20_000, "B's repeat answered or running");
      await release();
      const [firstAnswer, repeatAnswer] = await Promise.all([first, repeat]);
      expect({ status: firstAnswer.statusCode, created: firstAnswer.json().created }).toEqual({ status: 201, created: true });
      expect({ status: repeatAnswer.statusCode, body: repeatAnswer.json() }).toEqual({
        status: 409, body: { error: 'A request with this Idempotency-Key is still being processed; retry later.' },
      });
      // once A answered, B replays A's answer
      const again = await upsert(b.app, key, body);
      expect({ status: again.statusCode, replayed: again.headers['idempotent-replayed'], body: again.json() })
        .toEqual({ status: 201, replayed: 'true', body: firstAnswer.json() });
    } finally {
      await release();
    }
  });

  describe('the store: a claimer ahead of the claim\'s writer', () => {
    const box = sealedBox('test-pepper', 'idempotency-answers v1');
    let store: IdempotencyStore;
    beforeAll(() => {
      store = new IdempotencyStore(a.db.pool, box);
    });

    it('a live lease is not taken over by a claimer whose clock is past it; a lease past by both clocks is', async () => {
      const t0 = new Date();
      expect(await store.claim(9, 'skew-lease', 'fp', t0, 15_000)).toMatchObject({ claimed: true });
      const ahead = new Date(t0.getTime() + AHEAD_MS);
      expect(await store.claim(9, 'skew-lease', 'fp', ahead, 15_000)).toEqual({
        claimed: false, record: { state: 'in_flight', fingerprint: 'fp', leaseUntil: new Date(t0.getTime() + 15_000) },
      });
      // a lease written by a clock behind Postgres's, long past: taken over as before
      const past = new Date(t0.getTime() - 60_000);
      expect(await store.claim(9, 'skew-dead', 'fp', past, 15_000)).toMatchObject({ claimed: true });
      expect(await store.claim(9, 'skew-dead', 'fp', t0, 15_000)).toMatchObject({ claimed: true });
    });

    it("a key's 24 h end by the claimer's clock only: neither replaced by a new request nor purged", async () => {
      const t0 = new Date();
      const claimed = await store.claim(9, 'skew-ttl', 'fp', t0, 15_000);
      if (!claimed.claimed) throw new Error('skew-ttl is held');
      await store.complete(claimed.claim, { statusCode: 201, contentType: 'application/json', body: '{"ok":true}' });
      const dayAhead = new Date(t0.getTime() + KEY_TTL_MS + 1000);
      expect(await store.claim(9, 'skew-ttl', 'other', dayAhead, 15_000)).toMatchObject({ claimed: false, record: { state: 'completed', fingerprint: 'fp' } });
      await store.purgeExpired(dayAhead);
      expect(await store.find(9, 'skew-ttl')).toMatchObject({ state: 'completed', fingerprint: 'fp' });
    });
  });
});
