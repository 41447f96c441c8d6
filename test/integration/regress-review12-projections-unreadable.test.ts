import { randomUUID } from 'node:crypto';
import type { PoolClient } from 'pg';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { createEventRegistry } from '../../src/events/catalogue';
import type { EventToAppend, Position, RecordedEvent } from '../../src/ports/event-store';
import type { Projection } from '../../src/projections/projection';
import { readCheckpoint, readProjectionHealth } from '../../src/projections/store';
import { ProjectionRunner } from '../../src/workers/projection-runner';
import { createTestDatabase, type TestDatabase } from '../support/db';

// Regression review 12 of 81a9994 (the runner reads the adapter and upcasts each event itself): an event its schema
// refuses stalls the projections that handle its type; once a version of the code can read it (an upcaster, a schema
// fix), that version applies it and the projection is healthy again: after a restart, and during a rolling upgrade
// where a process of the version before still runs beside it. docs/core.md, "Projections".

const ev = (type: string, data: unknown): EventToAppend => {
  const id = randomUUID();
  return { type, data, metadata: { eventId: id, correlationId: id, causationId: null, companyId: 1, actor: 'test', at: new Date().toISOString() } };
};

const counter = (name: string, handles: string[]): Projection => ({
  name,
  version: 1,
  schema: `rm_${name}`,
  handles,
  ddl: 'CREATE TABLE IF NOT EXISTS seen (pos text PRIMARY KEY, type text NOT NULL, fixed boolean NOT NULL)',
  async apply(tx: PoolClient, e: RecordedEvent) {
    await tx.query('INSERT INTO seen (pos, type, fixed) VALUES ($1, $2, $3)', [e.position, e.type, (e.data as { fixed?: boolean }).fixed === true]);
  },
});

const waitUntil = async (what: string, test: () => Promise<boolean>, ms = 30_000) => {
  const until = Date.now() + ms;
  while (!(await test())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe('regress review 12: a projection stalled on an unreadable event recovers once it can be read (81a9994)', () => {
  let db: TestDatabase;
  let raw: PostgresEventStore;
  beforeEach(async () => {
    db = await createTestDatabase({ poolSize: 20 });
    raw = new PostgresEventStore(db.pool);
  });
  afterEach(async () => {
    await db.drop();
  });

  const registry = createEventRegistry();
  /** the version before: the registry refuses the stored shape */
  const before = (e: RecordedEvent) => (registry.has(e.type) ? registry.upcast(e) : e);
  /** the fixed version: the stored shape of TemplateSendAccepted is taken (as an upcaster would) */
  const fixed = (e: RecordedEvent) => (e.type === 'TemplateSendAccepted' ? { ...e, data: { fixed: true } } : before(e));
  const poison = () =>
    db.pool.query(
      `INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata)
       VALUES ('send-poison', 0, gen_random_uuid(), 'TemplateSendAccepted', '{}', jsonb_build_object('eventId', gen_random_uuid(),
               'correlationId', gen_random_uuid(), 'causationId', null, 'companyId', 1, 'actor', 'test', 'at', now()::text))`,
    );
  const logs: Array<{ runner: string; level: string; projection?: unknown }> = [];
  const loggerOf = (runner: string) => ({
    info: () => undefined,
    warn: () => undefined,
    error: (obj: object) => logs.push({ runner, level: 'error', projection: (obj as { projection?: unknown }).projection }),
  });
  const seen = async () => (await db.pool.query('SELECT type, fixed FROM rm_sends_like.seen ORDER BY pos')).rows as Array<{ type: string; fixed: boolean }>;
  const state = async () => {
    const cp = await readCheckpoint(db.pool, 'sends_like');
    const [health] = await readProjectionHealth(db.pool, raw, [counter('sends_like', [])], new Date());
    return { state: cp?.state, error: cp?.error ?? null, failing: health.failing, lag: health.lagSeconds };
  };
  const atHead = async (head: Position) => raw.comparePositions((await readCheckpoint(db.pool, 'sends_like'))!.position, head) >= 0;

  async function stalledBy(runner: ProjectionRunner): Promise<void> {
    for (let i = 0; i < 3; i++) await raw.append(`a-${i}`, [ev('Counted', {})], 'no_stream');
    await poison();
    for (let i = 0; i < 4; i++) await raw.append(`b-${i}`, [ev('Counted', {})], 'no_stream');
    await runner.start();
    await waitUntil('the old version failing', async () => (await state()).state === 'failing');
    expect(await seen()).toHaveLength(3);
    expect(await state()).toMatchObject({ state: 'failing', error: expect.stringMatching(/cannot be read/), failing: true });
  }

  it('after a restart with the fix: the event and those after it applied once, state running, the metric 0', async () => {
    const old = new ProjectionRunner(db.pool, raw, [counter('sends_like', ['TemplateSendAccepted', 'Counted'])], { pollMs: 10, upcast: before, logger: loggerOf('old') });
    await stalledBy(old);
    await old.stop();
    const next = new ProjectionRunner(db.pool, raw, [counter('sends_like', ['TemplateSendAccepted', 'Counted'])], { pollMs: 10, upcast: fixed, logger: loggerOf('new') });
    await next.start();
    try {
      const head = await raw.headPosition();
      await next.waitFor(head);
      expect(await seen()).toEqual([...Array(3).fill({ type: 'Counted', fixed: false }), { type: 'TemplateSendAccepted', fixed: true }, ...Array(4).fill({ type: 'Counted', fixed: false })]);
      expect(await state()).toEqual({ state: 'running', error: null, failing: false, lag: 0 });
    } finally {
      await next.stop();
    }
  });

  it('a rolling upgrade: the new version applies it while the old one still runs; the old one stops failing and does not mark it failing again', async () => {
    logs.length = 0;
    const old = new ProjectionRunner(db.pool, raw, [counter('sends_like', ['TemplateSendAccepted', 'Counted'])], { pollMs: 10, upcast: before, logger: loggerOf('old') });
    await stalledBy(old);
    const next = new ProjectionRunner(db.pool, raw, [counter('sends_like', ['TemplateSendAccepted', 'Counted'])], { pollMs: 10, upcast: fixed, logger: loggerOf('new') });
    await next.start();
    try {
      const head = await raw.headPosition();
      await waitUntil('the new version at the head', () => atHead(head));
      // the old process sees the projection past the event (before the fix: it retried from where it had failed, for ever)
      await old.waitFor(head, undefined, 30_000);
      const oldErrors = logs.filter((l) => l.runner === 'old').length;
      // more events, applied by one of them; the old one fails no more
      for (let i = 0; i < 3; i++) await raw.append(`c-${i}`, [ev('Counted', {})], 'no_stream');
      const head2 = await raw.headPosition();
      await waitUntil('both past the new events', async () => (await atHead(head2)));
      await old.waitFor(head2, undefined, 30_000);
      await next.waitFor(head2, undefined, 30_000);
      expect(await seen()).toHaveLength(11);
      expect(await state()).toEqual({ state: 'running', error: null, failing: false, lag: 0 });
      expect(logs.filter((l) => l.runner === 'old').length).toBe(oldErrors);
      expect(logs.filter((l) => l.runner === 'new')).toEqual([]);
    } finally {
      await next.stop();
      await old.stop();
    }
  });
});
