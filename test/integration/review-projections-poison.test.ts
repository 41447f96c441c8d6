import { randomUUID } from 'node:crypto';
import type { PoolClient } from 'pg';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { createEventRegistry } from '../../src/events/catalogue';
import { ValidatingEventStore } from '../../src/events/validating-store';
import type { EventToAppend, RecordedEvent } from '../../src/ports/event-store';
import type { Projection } from '../../src/projections/projection';
import { rebuildProjection } from '../../src/projections/rebuild';
import { readCheckpoint, readProjectionHealth } from '../../src/projections/store';
import { ProjectionRunner } from '../../src/workers/projection-runner';
import { createTestDatabase, type TestDatabase } from '../support/db';

// Review (projections): an event that one projection cannot take (its apply throws; or its data is refused by the
// event's schema on read). That projection stalls with one clear, visible failure (checkpoint state and error, the
// metrics' health, an error log naming it); the projections that do not take that event go on to the head.

const ev = (type: string, data: unknown): EventToAppend => {
  const id = randomUUID();
  return { type, data, metadata: { eventId: id, correlationId: id, causationId: null, companyId: 1, actor: 'test', at: new Date().toISOString() } };
};

function counter(name: string, handles: string[], poison?: (e: RecordedEvent) => boolean): Projection {
  return {
    name,
    version: 1,
    schema: `rm_${name}`,
    handles,
    ddl: 'CREATE TABLE IF NOT EXISTS seen (pos text PRIMARY KEY)',
    async apply(tx: PoolClient, e: RecordedEvent) {
      if (poison?.(e)) throw new Error(`cannot take event ${e.position}`);
      await tx.query('INSERT INTO seen (pos) VALUES ($1)', [e.position]);
    },
  };
}

const waitUntil = async (what: string, test: () => Promise<boolean>, ms = 20_000) => {
  const until = Date.now() + ms;
  while (!(await test())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe('review: an event a projection cannot take', () => {
  let db: TestDatabase;
  let raw: PostgresEventStore;
  let store: ValidatingEventStore;
  beforeEach(async () => {
    db = await createTestDatabase({ poolSize: 10 });
    raw = new PostgresEventStore(db.pool);
    store = new ValidatingEventStore(raw, createEventRegistry());
  });
  afterEach(async () => {
    await db.drop();
  });

  const logs: Array<{ level: string; obj: Record<string, unknown>; msg?: string }> = [];
  const logger = {
    info: (obj: object, msg?: string) => logs.push({ level: 'info', obj: obj as Record<string, unknown>, msg }),
    warn: (obj: object, msg?: string) => logs.push({ level: 'warn', obj: obj as Record<string, unknown>, msg }),
    error: (obj: object, msg?: string) => logs.push({ level: 'error', obj: obj as Record<string, unknown>, msg }),
  };

  it("apply throws: that projection fails visibly and stalls before the event; the others reach the head", async () => {
    logs.length = 0;
    const stuck = counter('stuck', ['Counted'], (e) => (e.data as { poison?: boolean }).poison === true);
    const fine = counter('fine', ['Counted']);
    const runner = new ProjectionRunner(db.pool, store, [stuck, fine], { batchSize: 5, pollMs: 10, logger });
    await runner.start();
    try {
      for (let i = 0; i < 12; i++) await raw.append(`c-${i}`, [ev('Counted', { poison: i === 7 })], 'no_stream');
      const head = await raw.headPosition();
      await runner.waitFor(head, [fine]);
      await waitUntil('stuck failing', async () => (await readCheckpoint(db.pool, 'stuck'))?.state === 'failing');
      const cp = await readCheckpoint(db.pool, 'stuck');
      expect(cp?.error).toMatch(/cannot take event/);
      expect((await db.pool.query('SELECT count(*)::int AS n FROM rm_stuck.seen')).rows[0].n).toBeLessThan(8);
      const health = await readProjectionHealth(db.pool, raw, [stuck, fine], new Date());
      expect(health.find((h) => h.projection === 'stuck')?.failing).toBe(true);
      expect(health.find((h) => h.projection === 'fine')).toEqual({ projection: 'fine', failing: false, lagSeconds: 0 });
      expect(logs.some((l) => l.level === 'error' && l.obj.projection === 'stuck')).toBe(true);
      expect((await db.pool.query('SELECT count(*)::int AS n FROM rm_fine.seen')).rows[0].n).toBe(12);
    } finally {
      await runner.stop();
    }
  });

  // as main.ts wires the runner: the adapter itself, each event upcast (and validated) by the registry on its own
  const registry = createEventRegistry();
  const upcast = (e: RecordedEvent) => (registry.has(e.type) ? registry.upcast(e) : e);
  const poison = () =>
    db.pool.query(
      `INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata)
       VALUES ('send-poison', 0, gen_random_uuid(), 'TemplateSendAccepted', '{}', jsonb_build_object('eventId', gen_random_uuid(),
               'correlationId', gen_random_uuid(), 'causationId', null, 'companyId', 1, 'actor', 'test', 'at', now()::text))`,
    );

  it("an event its schema refuses on read stalls only the projections that handle its type", async () => {
    logs.length = 0;
    const sendsLike = counter('sends_like', ['TemplateSendAccepted', 'Counted']);
    const fine = counter('fine', ['Counted']);
    const runner = new ProjectionRunner(db.pool, raw, [sendsLike, fine], { batchSize: 5, pollMs: 10, logger, upcast });
    await runner.start();
    try {
      for (let i = 0; i < 3; i++) await raw.append(`a-${i}`, [ev('Counted', {})], 'no_stream');
      await poison();
      for (let i = 0; i < 9; i++) await raw.append(`b-${i}`, [ev('Counted', {})], 'no_stream');
      const head = await raw.headPosition();
      await runner.waitFor(head, [fine], 15_000);
      expect((await db.pool.query('SELECT count(*)::int AS n FROM rm_fine.seen')).rows[0].n).toBe(12);
      await waitUntil('sends_like failing', async () => (await readCheckpoint(db.pool, 'sends_like'))?.state === 'failing');
      const cp = await readCheckpoint(db.pool, 'sends_like');
      expect(cp?.error).toMatch(/TemplateSendAccepted, stream send-poison\) cannot be read/);
      // stalled just before it: the three events before it applied, none after
      expect((await db.pool.query('SELECT count(*)::int AS n FROM rm_sends_like.seen')).rows[0].n).toBe(3);
      const poisonAt = (await db.pool.query(`SELECT tx_id || ':' || seq AS pos FROM es.events WHERE stream_id = 'send-poison'`)).rows[0].pos;
      expect(raw.comparePositions(cp!.position, poisonAt)).toBeLessThan(0);
      expect(await raw.countAfter(cp!.position)).toBe(10);
      expect((await readCheckpoint(db.pool, 'fine'))?.state).toBe('running');
      expect(logs.some((l) => l.level === 'error' && l.obj.projection === 'sends_like')).toBe(true);
      expect(logs.some((l) => l.level === 'error' && l.obj.projection === 'fine')).toBe(false);
    } finally {
      await runner.stop();
    }
  });

  it('a rebuild passes such an event when its projection does not handle the type, and fails on it when it does', async () => {
    const fine = counter('fine', ['Counted']);
    const sendsLike = counter('sends_like', ['TemplateSendAccepted', 'Counted']);
    for (let i = 0; i < 3; i++) await raw.append(`a-${i}`, [ev('Counted', {})], 'no_stream');
    await poison();
    for (let i = 0; i < 4; i++) await raw.append(`b-${i}`, [ev('Counted', {})], 'no_stream');
    const runner = new ProjectionRunner(db.pool, raw, [fine, sendsLike], { upcast });
    await runner.prepare();
    // the log is read only below the cluster's oldest running transaction (test databases share one cluster, and
    // other suites hold transactions open): once `fine` has caught up to the head, every event here is readable
    expect(await runner.catchUp(Date.now() + 60_000, [fine])).toBe(true);
    await expect(rebuildProjection(db.pool, runner.reader, fine, {})).resolves.toMatchObject({ applied: 7 });
    expect((await db.pool.query('SELECT count(*)::int AS n FROM rm_fine.seen')).rows[0].n).toBe(7);
    await expect(rebuildProjection(db.pool, runner.reader, sendsLike, {})).rejects.toThrow(/cannot be read/);
    expect((await readCheckpoint(db.pool, 'sends_like'))?.error).toMatch(/^rebuild failed: .*cannot be read/);
  });
});
