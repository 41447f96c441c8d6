import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, eventLogReadable, type TestDatabase } from '../support/db';
import { describeWithBuiltCli, STACK_LINE } from '../support/e2e-server';
import { eventsCliEnv, exportWithHeapLimit } from '../support/events-export-cli';

// Regression review 22 (of dfef5d9): `events export` sized its next read by eventSizeEstimate of the batch's events,
// which measures an array of more than 3 items by its first, middle and last, instead of the length of the lines it
// had just written (exact, and already computed). A bulk chunk whose large recipient is none of those three (here 4
// recipients, the second with 2 MB of variables) was estimated at a few hundred bytes: reads doubled 1, 2, 4 … 64
// (128 MB of events in one read) and the export died of a 192 MB heap, nothing said but the crash. A heap limit far
// below the log's size is the check (no timing), as in review19-eventlog-memory.

const SECRETS = { ANONYMIZATION_SECRET: 'review22-anonymization-secret', API_KEY_PEPPER: 'review22-api-key-pepper' };
const EVENTS = 200;
const BIG = 2_000_000;
const HEAP_MB = 192;

const d = describeWithBuiltCli('regress-review22 export read size suite');

d('regress-review22: events export sizes its reads by the lines it writes', () => {
  let db: TestDatabase;
  let env: NodeJS.ProcessEnv;
  let dir: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    dir = mkdtempSync(join(tmpdir(), 'regress-review22-export-'));
    env = eventsCliEnv(db.url, dir, SECRETS);
    // each event a chunk of 4 recipients (a bulk of 4), the second with 2 MB of variables
    await db.pool.query(
      `INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata)
       SELECT 'bulkchunk-00000000-0000-4000-8000-' || lpad(n::text, 12, '0') || '-0', 0, gen_random_uuid(), 'BulkRecipientsAdded',
              jsonb_build_object('bulkId', '00000000-0000-4000-8000-' || lpad(n::text, 12, '0'), 'companyId', 7, 'chunk', 0,
                'recipients', (SELECT jsonb_agg(jsonb_build_object('index', i, 'phone', '+54911' || lpad((n * 4 + i)::text, 8, '0'),
                   'variables', CASE WHEN i = 1 THEN jsonb_build_object('note', md5(n::text) || repeat('x', $2::int)) ELSE '{}'::jsonb END,
                   'buttonVariables', '{}'::jsonb) ORDER BY i)
                   FROM generate_series(0, 3) AS i)),
              jsonb_build_object('eventId', gen_random_uuid(), 'correlationId', gen_random_uuid(), 'causationId', null,
                'companyId', 7, 'actor', 'system', 'at', '2026-11-28T12:00:00.000Z', 'schemaVersion', 1)
         FROM generate_series(0, $1::int - 1) AS n`,
      [EVENTS, BIG],
    );
    await eventLogReadable(db.pool); // another file's open transaction would hold the export back
  }, 300_000);
  afterAll(async () => {
    await db?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it(`exports ${EVENTS} chunks of 2 MB whose sampled recipients are small, with a ${HEAP_MB} MB heap`, async () => {
    const r = await exportWithHeapLimit(env, HEAP_MB);
    expect({ status: r.status, signal: r.signal, stderr: r.stderr.slice(-2000) }).toEqual({ status: 0, signal: null, stderr: expect.stringContaining(`exported ${EVENTS} events`) });
    expect(r.stderr).not.toMatch(STACK_LINE);
    expect(r.lines).toBe(EVENTS);
    expect(new Set(r.positions).size).toBe(EVENTS);
  }, 600_000);
});
