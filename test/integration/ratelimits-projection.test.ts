import type { Position, RecordedEvent } from '../../src/ports/event-store';
import { rateLimitsProjection } from '../../src/projections/ratelimits/projection';
import { listCompanyRateLimits } from '../../src/projections/ratelimits/queries';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { fillProjection } from '../support/projections';

// The per-company rate limits read model (docs/rate-limits.md) on real Postgres, events delivered once and twice.

const event = (revision: number, companyId: number, perMinute: number | null, at: string): RecordedEvent => ({
  type: 'CompanyRateLimitSet',
  data: { companyId, perMinute },
  metadata: { eventId: `e${companyId}-${revision}`, correlationId: 'c', causationId: null, companyId, actor: 'cli', at },
  streamId: `company-${companyId}`,
  revision: BigInt(revision),
  position: String(revision) as Position,
});

describe('ratelimits projection', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  const log = [
    event(5, 101, 600, '2026-03-01T10:00:00.000Z'),
    event(3, 202, 60, '2026-03-01T10:01:00.000Z'),
    event(6, 101, 6000, '2026-03-01T10:02:00.000Z'),
    event(4, 202, null, '2026-03-01T10:03:00.000Z'),
  ];

  it.each([
    ['once', [log]],
    ['twice (every event redelivered)', [log, log]],
    ['one event at a time, each twice', log.flatMap((e) => [[e], [e]])],
  ])('keeps each company\'s last limit, none after a reset to the default, delivered %s', async (_how, batches) => {
    await fillProjection(db.pool, rateLimitsProjection, rateLimitsProjection.schema, batches as RecordedEvent[][]);
    expect(await listCompanyRateLimits(db.pool)).toEqual([{ companyId: 101, perMinute: 6000, setAt: new Date('2026-03-01T10:02:00.000Z') }]);
  });
});
