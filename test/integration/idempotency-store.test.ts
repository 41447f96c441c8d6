import fc from 'fast-check';
import { IdempotencyStore, type KeyClaim, KEY_TTL_MS } from '../../src/http/idempotency-store';
import { canonicalJson } from '../../src/shared/canonical-json';
import { sealedBox } from '../../src/shared/sealed-box';
import { createTestDatabase, type TestDatabase } from '../support/db';

// The idempotency_keys table on real Postgres: claims, answers, releases, lease takeover, expiry and purge.

const T0 = new Date('2026-03-01T10:00:00.000Z');
const at = (ms: number) => new Date(T0.getTime() + ms);
const LEASE = 15_000;
const ANSWER = { statusCode: 200, contentType: 'application/json; charset=utf-8', body: '{"ok":true}' };
const box = sealedBox('test-pepper', 'idempotency-answers v1');

describe('IdempotencyStore', () => {
  let db: TestDatabase;
  let store: IdempotencyStore;

  beforeAll(async () => {
    db = await createTestDatabase();
    store = new IdempotencyStore(db.pool, box);
  });
  afterAll(async () => {
    await db?.drop();
  });

  /** claims a key that must be free */
  const claimed = async (companyId: number, key: string, fingerprint: string, now: Date): Promise<KeyClaim> => {
    const r = await store.claim(companyId, key, fingerprint, now, LEASE);
    if (!r.claimed) throw new Error(`${key} is held`);
    return r.claim;
  };

  it('the first claim wins; a repeat sees the claim in flight, then the recorded answer', async () => {
    const first = await store.claim(1, 'a', 'fp1', T0, LEASE);
    expect(first).toEqual({ claimed: true, claim: { companyId: 1, key: 'a', fingerprint: 'fp1', claimedAt: T0 } });
    expect(await store.claim(1, 'a', 'fp1', at(1), LEASE)).toEqual({
      claimed: false, record: { state: 'in_flight', fingerprint: 'fp1', leaseUntil: at(LEASE) },
    });
    await store.complete((first as { claim: KeyClaim }).claim, ANSWER);
    expect(await store.claim(1, 'a', 'fp1', at(2), LEASE)).toEqual({ claimed: false, record: { state: 'completed', fingerprint: 'fp1', answer: ANSWER } });
    expect(await store.claim(1, 'a', 'other', at(3), LEASE)).toEqual({ claimed: false, record: { state: 'completed', fingerprint: 'fp1', answer: ANSWER } });
  });

  it('keeps an answer sealed: the row holds ciphertext, not the body, and gives the body back', async () => {
    const secretAnswer = { statusCode: 201, contentType: 'application/json', body: '{"secret":"whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ="}' };
    await store.complete(await claimed(1, 'sealed', 'fp', T0), secretAnswer);
    const row = (await db.pool.query('SELECT state, status_code, body FROM public.idempotency_keys WHERE company_id = 1 AND key = $1', ['sealed'])).rows[0];
    expect([row.state, row.status_code]).toEqual(['sealed', 201]);
    expect(row.body).not.toContain('whsec_');
    expect(box.open(row.body)).toBe(secretAnswer.body);
    expect(await store.find(1, 'sealed')).toEqual({ state: 'completed', fingerprint: 'fp', answer: secretAnswer });
  });

  it('replays a plaintext answer recorded by the version before (state completed) until it expires', async () => {
    await db.pool.query(
      `INSERT INTO public.idempotency_keys (company_id, key, fingerprint, state, lease_until, status_code, content_type, body, created_at, expires_at)
       VALUES (1, 'plain', 'fp', 'completed', $1, 200, $2, $3, $1, $4)`,
      [T0, ANSWER.contentType, ANSWER.body, at(KEY_TTL_MS)],
    );
    expect(await store.claim(1, 'plain', 'fp', at(1), LEASE)).toEqual({ claimed: false, record: { state: 'completed', fingerprint: 'fp', answer: ANSWER } });
  });

  it('of 20 concurrent claims of one key exactly one wins', async () => {
    const results = await Promise.all(Array.from({ length: 20 }, () => store.claim(1, 'race', 'fp', T0, LEASE)));
    expect(results.filter((r) => r.claimed)).toHaveLength(1);
    expect(results.filter((r) => !r.claimed)).toHaveLength(19);
  });

  it('keys are per company', async () => {
    expect(await store.claim(2, 'shared', 'fp', T0, LEASE)).toMatchObject({ claimed: true });
    expect(await store.claim(3, 'shared', 'fp', T0, LEASE)).toMatchObject({ claimed: true });
  });

  it('a released claim (a 5xx) can be claimed again', async () => {
    await store.release(await claimed(1, 'released', 'fp', T0));
    expect(await store.find(1, 'released')).toBeUndefined();
    expect(await store.claim(1, 'released', 'fp', at(1), LEASE)).toMatchObject({ claimed: true });
  });

  it('a claim past its lease is taken over by the same request only; a renewed lease is not', async () => {
    await store.renew(await claimed(1, 'lease', 'fp', T0), at(2 * LEASE));
    expect((await store.claim(1, 'lease', 'fp', at(LEASE), LEASE)).claimed).toBe(false);
    expect(await store.claim(1, 'lease', 'other', at(2 * LEASE), LEASE)).toEqual({
      claimed: false, record: { state: 'in_flight', fingerprint: 'fp', leaseUntil: at(2 * LEASE) },
    });
    expect(await store.claim(1, 'lease', 'fp', at(2 * LEASE), LEASE)).toMatchObject({ claimed: true });
  });

  it('an answer is not recorded over a claim another request took over', async () => {
    const first = await claimed(1, 'taken', 'fp', T0);
    await store.release(first);
    await store.claim(1, 'taken', 'fp2', at(1), LEASE);
    await store.complete(first, ANSWER);
    expect(await store.find(1, 'taken')).toEqual({ state: 'in_flight', fingerprint: 'fp2', leaseUntil: at(1 + LEASE) });
  });

  it("a claim taken over after its lease lapsed (a stalled process) cannot release, renew or complete the new one's", async () => {
    const stalled = await claimed(1, 'stalled', 'fp', T0);
    const takeover = await claimed(1, 'stalled', 'fp', at(LEASE)); // the same request, retried once the lease lapsed
    expect(takeover.claimedAt).toEqual(at(LEASE));
    await store.release(stalled); // the stalled run ends in a 5xx
    await store.renew(stalled, at(10 * LEASE));
    await store.complete(stalled, { ...ANSWER, body: 'from the stalled run' });
    expect(await store.find(1, 'stalled')).toEqual({ state: 'in_flight', fingerprint: 'fp', leaseUntil: at(2 * LEASE) });
    expect(await store.claim(1, 'stalled', 'fp', at(LEASE + 1), LEASE)).toMatchObject({ claimed: false }); // no third run meanwhile
    await store.complete(takeover, ANSWER);
    expect(await store.find(1, 'stalled')).toEqual({ state: 'completed', fingerprint: 'fp', answer: ANSWER });
  });

  it('a record is forgotten 24 h after its claim and purged', async () => {
    await store.complete(await claimed(4, 'old', 'fp', T0), ANSWER);
    expect((await store.claim(4, 'old', 'new', at(KEY_TTL_MS - 1), LEASE)).claimed).toBe(false);
    expect(await store.claim(4, 'old', 'new', at(KEY_TTL_MS), LEASE)).toMatchObject({ claimed: true });
    await store.claim(4, 'purged', 'fp', T0, LEASE);
    expect(await store.purgeExpired(at(KEY_TTL_MS - 1))).toBe(0);
    const purged = await store.purgeExpired(at(KEY_TTL_MS));
    expect(purged).toBeGreaterThanOrEqual(1);
    expect(await store.find(4, 'purged')).toBeUndefined();
    expect(await store.find(4, 'old')).toEqual({ state: 'in_flight', fingerprint: 'new', leaseUntil: at(KEY_TTL_MS + LEASE) });
  });

  it('the purge takes every expired record in batches, not one batch a run (review 19); a live one stays', async () => {
    await db.pool.query(
      `INSERT INTO public.idempotency_keys (company_id, key, fingerprint, state, created_at, lease_until, expires_at)
       SELECT 77, 'old-' || i, 'fp', 'in_flight', $1, $1, $1 FROM generate_series(1, 2500) AS i`, [T0]);
    await store.claim(77, 'live', 'fp', at(KEY_TTL_MS), LEASE);
    // the other tests' records expired by then are purged too
    const expired = (await db.pool.query('SELECT count(*)::int AS n FROM public.idempotency_keys WHERE expires_at <= $1', [at(KEY_TTL_MS)])).rows[0].n;
    expect(await store.purgeAllExpired(at(KEY_TTL_MS), { batch: 1_000, maxBatches: 2 })).toBe(2_000);
    expect(await store.purgeAllExpired(at(KEY_TTL_MS), { batch: 1_000 })).toBe(expired - 2_000);
    const left = await db.pool.query('SELECT key FROM public.idempotency_keys WHERE company_id = 77');
    expect(left.rows.map((r) => r.key)).toEqual(['live']);
    await db.pool.query(`INSERT INTO public.idempotency_keys (company_id, key, fingerprint, state, created_at, lease_until, expires_at) VALUES (77, 'old', 'fp', 'in_flight', $1, $1, $1)`, [T0]);
    expect(await store.purgeAllExpired(at(KEY_TTL_MS), { stopping: () => true })).toBe(0);
  });
});

describe('canonicalJson', () => {
  it('sorts keys at every depth and drops undefined members', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { y: 2, x: 1 }], c: undefined } })).toBe('{"a":{"d":[1,{"x":1,"y":2}]},"b":1}');
    expect(canonicalJson({ a: 1, b: 2 })).toBe(canonicalJson({ b: 2, a: 1 }));
    expect(canonicalJson(null)).toBe('null');
    expect(canonicalJson([undefined, [], {}, 'x'])).toBe('[null,[],{},"x"]');
  });

  // the recursive definition the iterative implementation must match
  const reference = (value: unknown): string => {
    if (Array.isArray(value)) return `[${value.map((v) => reference(v ?? null)).join(',')}]`;
    if (value !== null && typeof value === 'object') {
      const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${reference(v)}`).join(',')}}`;
    }
    return JSON.stringify(value ?? null);
  };

  it('matches the recursive definition on random JSON values', () => {
    fc.assert(fc.property(fc.jsonValue({ maxDepth: 6 }), (value) => {
      expect(canonicalJson(value)).toBe(reference(value));
      expect(JSON.parse(canonicalJson(value))).toEqual(JSON.parse(JSON.stringify(value)));
    }), { numRuns: 300 });
  });

  it('handles a body nested 100,000 levels deep (no recursion)', () => {
    const deep = JSON.parse(`${'{"b":1,"a":['.repeat(100_000)}${']}'.repeat(100_000)}`);
    expect(canonicalJson(deep)).toBe(`${'{"a":['.repeat(100_000)}${'],"b":1}'.repeat(100_000)}`);
  });
});
