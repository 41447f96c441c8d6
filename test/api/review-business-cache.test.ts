import pino from 'pino';
import { InProcessTransport } from '../../src/adapters/in-process/transport';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { createPool } from '../../src/adapters/postgres/pool';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { loadConfig } from '../../src/config';
import { assembleServices } from '../../src/main';
import type { Services } from '../../src/services';
import { createTestApp, TEST_ANON_SECRET, TEST_PEPPER } from '../support/services';
import { EXAMPLE, SECOND, twoCompanyFixture } from '../support/provisioning';

// The business read endpoints answer from a per-process cache (src/http/read-cache.ts). Re-provisioning must show
// in the next read of the process that applied it (read-your-writes), also while other requests keep reading (and
// caching) during the change, and in another process once its notification arrives; another company's entries are
// never touched or served. Decisions: docs/business.md, docs/provisioning.md ("Read cache and performance").

// The "changing" marks (src/projections/change-signals.ts) are per process; both services of this test share one Node
// process, so the other process's marks are switched off here: this process then learns of the change only by the
// notification, as a separate `serve` would.
const marks = { on: true };
jest.mock('../../src/projections/change-signals', () => {
  const actual = jest.requireActual('../../src/projections/change-signals');
  return { ...actual, markChanging: (...args: [string, number | string]) => (marks.on ? actual.markChanging(...args) : undefined) };
});

const NOW = '2026-03-01T10:00:00.000Z';
const URLS = ['/api/v1/business-info/', '/api/v1/business-hours/', '/api/v1/holidays/', '/api/v1/holidays/?from=2026-12-25', '/api/v1/business-accounts/'];

/** The fixture as round `round` provisions it: every endpoint shows something that changed. */
function roundFixture(round: number): any {
  const doc = twoCompanyFixture();
  const c = doc.companies[0];
  c.name = `Clinica ${round}`;
  c.branches[0].name = `Sede ${round}`;
  c.branches[0].schedules[0].startTime = `0${round % 10}:00:00`;
  c.holidays[1].description = `Reduced hours ${round}`;
  c.holidays[0].date = `2026-12-${25 + (round % 5)}`;
  c.phoneNumbers[0].messagingLimitTier = round % 2 ? 'TIER_1000' : 'TIER_250';
  c.phoneNumbers[0].templates[1].status = round % 2 ? 'APPROVED' : 'PAUSED';
  return doc;
}

/** What the five reads of company 101 show of round `round`'s changes. */
function expectedOf(round: number) {
  const c = roundFixture(round).companies[0];
  return {
    name: c.name,
    branch: [c.branches[0].name, c.branches[0].schedules[0].startTime],
    holiday32: [c.holidays[1].description, c.branches[0].name],
    from25: [c.holidays[0].date],
    accounts: [c.name, c.phoneNumbers[0].messagingLimitTier, round % 2 ? 2 : 1],
  };
}

async function observed(get: (url: string, key?: string) => Promise<{ statusCode: number; json(): any }>) {
  const res = await Promise.all(URLS.map((u) => get(u)));
  for (const r of res) expect(r.statusCode).toBe(200);
  const [info, hours, holidays, from25, accounts] = res.map((r) => r.json());
  const h32 = holidays.find((h: any) => h.id === 32);
  return {
    name: info.name,
    branch: [hours[0].branchName, hours[0].schedules[0].startTime],
    holiday32: [h32.description, h32.branchesDetail[0].name],
    from25: from25.map((h: any) => h.date),
    accounts: [accounts.companyName, accounts.phoneNumbers[0].messagingLimitTier, accounts.phoneNumbers[0].templates.length],
  };
}

describe('business read cache and re-provisioning', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  const get = (url: string, key: string = EXAMPLE.key) => t.app.inject({ method: 'GET', url, headers: { 'x-api-key': key } });

  beforeAll(async () => {
    t = await createTestApp({ now: () => new Date(NOW) });
    await seedFixture(t.services, roundFixture(0), { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('a re-provisioning shows in the next read, while other requests keep reading during it', async () => {
    const second = (await Promise.all(URLS.map((u) => get(u, SECOND.key)))).map((r) => r.body);
    for (let round = 1; round <= 8; round++) {
      let stop = false;
      const readers = Array.from({ length: 4 }, async () => {
        // (a cached answer through inject never waits for I/O: yield, or the seed's queries would starve)
        while (!stop) for (const u of URLS) {
          await get(u);
          await new Promise((r) => setImmediate(r));
        }
      });
      try {
        await seedFixture(t.services, roundFixture(round), { actor: 'test' });
        expect(await observed(get)).toEqual(expectedOf(round));
      } finally {
        stop = true;
        await Promise.all(readers);
      }
      expect(await observed(get)).toEqual(expectedOf(round));
      // the other company's answers are untouched (and never the changed company's)
      expect((await Promise.all(URLS.map((u) => get(u, SECOND.key)))).map((r) => r.body)).toEqual(second);
    }
  });

  describe('another process provisions (as `switchboard seed` does)', () => {
    let other: { services: Services; close(): Promise<void> };

    beforeAll(async () => {
      const pool = createPool(t.db.url, 4);
      const config = loadConfig({
        DATABASE_URL: t.db.url, ANONYMIZATION_SECRET: TEST_ANON_SECRET, API_KEY_PEPPER: TEST_PEPPER, SANDBOX_DELIVERY: 'off', LOG_LEVEL: 'silent',
      });
      const transport = new InProcessTransport();
      const services = assembleServices({
        config, secrets: { anonymizationSecret: TEST_ANON_SECRET, apiKeyPepper: TEST_PEPPER }, pool, exportPool: pool,
        store: new PostgresEventStore(pool), transport, logger: pino({ level: 'silent' }), now: () => new Date(NOW),
      });
      await services.runner.prepare(); // no runner loop: the seed advances the read models itself, like the CLI
      other = {
        services,
        async close() {
          await transport.close();
          await services.store.close();
          await pool.end();
        },
      };
    });
    afterAll(async () => {
      marks.on = true;
      await other?.close();
    });

    it('this process shows the change once the notification arrives, and never goes back', async () => {
      // marks already set expire: wait for the company to be quiet, so that the answers below are cached
      await new Promise((r) => setTimeout(r, 2_100));
      marks.on = false;
      for (let round = 20; round <= 23; round++) {
        await observed(get); // everything cached
        await seedFixture(other.services, roundFixture(round), { actor: 'test' });
        // eventually (the notification's delivery); a cache that missed it would keep the old answers until jest's timeout
        for (;;) {
          const now = await observed(get);
          if (JSON.stringify(now) === JSON.stringify(expectedOf(round))) break;
          await new Promise((r) => setTimeout(r, 10));
        }
        for (let i = 0; i < 5; i++) expect(await observed(get)).toEqual(expectedOf(round));
      }
    });
  });
});
