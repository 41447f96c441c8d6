import type { PoolClient } from 'pg';
import { lockKeyOf } from '../../src/projections/store';
import { createTestApp } from '../support/services';
import { KEY_101, provisionAll } from '../integration/contacts-support';

// A write whose read model cannot show it within the read-your-writes wait (here: another process holds the
// contacts projection, as a rebuild of it does) is kept, and answered 503 with Retry-After in the route's error
// shape: a temporary wait on the server's side, not an internal error.

describe('a write whose read model is behind', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let holder: PoolClient | undefined;

  beforeAll(async () => {
    t = await createTestApp();
    await provisionAll(t.services);
  });
  afterAll(async () => {
    await holder?.query('ROLLBACK').catch(() => undefined);
    holder?.release();
    await t.close();
  });

  it('answers 503 with Retry-After and the plain error shape; the write is kept and shows once the read model moves', async () => {
    holder = await t.db.pool.connect();
    await holder.query('BEGIN');
    await holder.query('SELECT pg_advisory_xact_lock(hashtext($1))', [lockKeyOf('contacts')]);

    const phone = '+5491160009999';
    const r = await t.app.inject({
      method: 'POST', url: '/api/v1/external/contacts/upsert/', headers: { 'x-api-key': KEY_101 }, payload: { phone, full_name: 'Eva Ruiz' },
    });
    expect(r.statusCode).toBe(503);
    expect(r.headers['retry-after']).toBe('5');
    expect(r.json()).toEqual({
      error: 'the request was recorded, but reads do not show it yet: read it again after Retry-After rather than repeating the request',
    });

    await holder.query('ROLLBACK');
    holder.release();
    holder = undefined;
    await t.services.runner.catchUp();
    const got = await t.app.inject({
      method: 'GET', url: `/api/v1/external/contacts/?phone=${encodeURIComponent(phone)}`, headers: { 'x-api-key': KEY_101 },
    });
    expect(got.statusCode).toBe(200);
    expect(JSON.stringify(got.json())).toContain('Eva Ruiz');
  });
});
