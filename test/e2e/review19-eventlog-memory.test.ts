import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, eventLogReadable, type TestDatabase } from '../support/db';
import { describeWithBuiltCli, STACK_LINE } from '../support/e2e-server';
import { eventsCliEnv, exportWithHeapLimit } from '../support/events-export-cli';

// Review 19: `switchboard events export` of a log of large events (a bulk send's BulkRecipientsAdded chunks: 1,000
// recipients with their variables, about 1.5 MB each here; up to the 32 MiB body of a send-bulk) must stream with
// bounded memory. Before the fix it read 2,000 events per batch whatever their size: 300 events of 1.5 MB (450 MB
// of log) were one batch, held at once, and the export died of a 192 MB heap. A heap limit far below the log's size
// is the check (no timing).

const SECRETS = { ANONYMIZATION_SECRET: 'review19-anonymization-secret', API_KEY_PEPPER: 'review19-api-key-pepper' };
const EVENTS = 300;
const HEAP_MB = 192;

const d = describeWithBuiltCli('review19 event-log memory suite');

d('review19: events export of large events keeps its memory bounded', () => {
  let db: TestDatabase;
  let env: NodeJS.ProcessEnv;
  let dir: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    dir = mkdtempSync(join(tmpdir(), 'review19-mem-'));
    env = eventsCliEnv(db.url, dir, SECRETS);
    // built in Postgres (not sent from here): each event a chunk of 1,000 recipients with ~1.4 KB of variables each
    await db.pool.query(
      `INSERT INTO es.events (stream_id, stream_revision, event_id, type, data, metadata)
       SELECT 'bulkchunk-00000000-0000-4000-8000-000000000019-' || n, 0, gen_random_uuid(), 'BulkRecipientsAdded',
              jsonb_build_object('bulkId', '00000000-0000-4000-8000-000000000019', 'companyId', 7, 'chunk', n,
                'recipients', (SELECT jsonb_agg(jsonb_build_object('index', n * 1000 + i, 'phone', '+54911' || lpad((n * 1000 + i)::text, 8, '0'),
                   'variables', jsonb_build_object('note', md5(n::text || ':' || i) || repeat('x', 1400)), 'buttonVariables', '{}'::jsonb))
                   FROM generate_series(0, 999) AS i)),
              jsonb_build_object('eventId', gen_random_uuid(), 'correlationId', gen_random_uuid(), 'causationId', null,
                'companyId', 7, 'actor', 'system', 'at', '2026-11-28T12:00:00.000Z', 'schemaVersion', 1)
         FROM generate_series(0, $1::int - 1) AS n`,
      [EVENTS],
    );
    await eventLogReadable(db.pool); // another file's open transaction would hold the export back
  }, 300_000);
  afterAll(async () => {
    await db?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it(`exports ${EVENTS} events of about 1.5 MB each (a 450 MB log) with a ${HEAP_MB} MB heap`, async () => {
    const { rows } = await db.pool.query<{ bytes: string }>('SELECT sum(octet_length(data::text))::text AS bytes FROM es.events');
    expect(Number(rows[0].bytes)).toBeGreaterThan(EVENTS * 1_400_000);
    const r = await exportWithHeapLimit(env, HEAP_MB);
    expect({ status: r.status, signal: r.signal, stderr: r.stderr.slice(-2000) }).toEqual({ status: 0, signal: null, stderr: expect.stringContaining(`exported ${EVENTS} events`) });
    expect(r.stderr).not.toMatch(STACK_LINE);
    expect(r.lines).toBe(EVENTS);
    expect(new Set(r.positions).size).toBe(EVENTS);
    expect(r.bytes).toBeGreaterThan(EVENTS * 1_400_000);
  }, 600_000);
});
