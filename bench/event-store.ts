// Postgres event store: append (batches of 1 and 100, 4 concurrent writers) and readAll throughput, each beside
// raw INSERT/SELECT on a table of the same shape, measured in the same run.
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { PostgresEventStore } from '../src/adapters/event-store/postgres';
import { createEventRegistry } from '../src/events/catalogue';
import { ValidatingEventStore } from '../src/events/validating-store';
import { type EventStore, type EventToAppend, START } from '../src/ports/event-store';
import { benchDatabase, emit, log, round } from './support';

const WRITERS = 4;

const event = (i: number): EventToAppend => {
  const eventId = randomUUID();
  return {
    type: 'OperatorRegistered',
    data: { companyId: 1 + (i % 50), operatorId: 1 + i, name: `operator ${i}` },
    metadata: { eventId, correlationId: eventId, causationId: null, companyId: 1 + (i % 50), actor: 'bench', at: new Date().toISOString() },
  };
};

async function timed(fn: () => Promise<number>): Promise<number> {
  const t0 = process.hrtime.bigint();
  const n = await fn();
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  return n / secs;
}

/** 4 writers, each on its own streams, appending `batches` batches of `size` events with exact expected revisions. */
function appendThroughStore(store: EventStore, size: number, batches: number, tag: string) {
  return timed(async () => {
    await Promise.all(
      Array.from({ length: WRITERS }, async (_, w) => {
        const revisions = new Map<string, bigint>();
        for (let b = 0; b < batches; b++) {
          const stream = `bench-${tag}-${w}-${b % 20}`;
          const rev = revisions.get(stream);
          const r = await store.append(stream, Array.from({ length: size }, (_, i) => event(b * size + i)), rev === undefined ? 'no_stream' : rev);
          revisions.set(stream, r.nextRevision);
        }
      }),
    );
    return WRITERS * size * batches;
  });
}

/** The same rows through a plain multi-row INSERT (no revision check, no idempotency, no notify). */
function appendRaw(pool: Pool, size: number, batches: number, tag: string) {
  return timed(async () => {
    await Promise.all(
      Array.from({ length: WRITERS }, async (_, w) => {
        const revisions = new Map<string, number>();
        for (let b = 0; b < batches; b++) {
          const stream = `raw-${tag}-${w}-${b % 20}`;
          const start = (revisions.get(stream) ?? -1) + 1;
          const evs = Array.from({ length: size }, (_, i) => event(b * size + i));
          await pool.query(
            `INSERT INTO bench_raw.events (stream_id, stream_revision, event_id, type, data, metadata)
             SELECT $1, $2::bigint + e.ord - 1, e.id, e.type, e.data, e.meta
               FROM unnest($3::uuid[], $4::text[], $5::jsonb[], $6::jsonb[]) WITH ORDINALITY AS e(id, type, data, meta, ord)`,
            [stream, start, evs.map((e) => e.metadata.eventId), evs.map((e) => e.type), evs.map((e) => JSON.stringify(e.data)), evs.map((e) => JSON.stringify(e.metadata))],
          );
          revisions.set(stream, start + size - 1);
        }
      }),
    );
    return WRITERS * size * batches;
  });
}

async function main(): Promise<void> {
  const db = await benchDatabase('event_store');
  try {
    await db.pool.query('CREATE SCHEMA bench_raw; CREATE TABLE bench_raw.events (LIKE es.events INCLUDING ALL)');
    const store = new PostgresEventStore(db.storePool); // as wired in main.ts

    // warm-up
    await appendThroughStore(store, 10, 20, 'warm');
    await appendRaw(db.pool, 10, 20, 'warm');

    for (const [size, batches] of [
      [1, 1500],
      [100, 60],
    ] as const) {
      log(`append: batches of ${size}, ${WRITERS} writers`);
      const raw = await appendRaw(db.pool, size, batches, `b${size}`);
      const ours = await appendThroughStore(store, size, batches, `b${size}`);
      emit({
        bench: 'event-store', metric: `append_batch${size}_events_per_s`, value: round(ours), unit: 'events/s',
        baseline: 'raw_insert', baseline_value: round(raw), writers: WRITERS,
      });
    }

    const total = Number((await db.pool.query('SELECT count(*) AS n FROM es.events')).rows[0].n);
    log(`readAll over ${total} events`);
    const readOurs = await timed(async () => {
      let pos = START;
      let n = 0;
      for (;;) {
        const b = await store.readAll(pos, 1000);
        if (b.events.length === 0) return n;
        n += b.events.length;
        pos = b.nextPosition;
      }
    });
    const readRaw = await timed(async () => {
      let tx = '-1';
      let seq = '-1';
      let n = 0;
      for (;;) {
        const r = await db.pool.query(
          `SELECT seq, tx_id, stream_id, stream_revision, type, data, metadata FROM es.events
            WHERE (tx_id, seq) > ($1::bigint, $2::bigint) ORDER BY tx_id, seq LIMIT 1000`,
          [tx, seq],
        );
        if (r.rowCount === 0) return n;
        n += r.rowCount!;
        tx = r.rows[r.rows.length - 1].tx_id;
        seq = r.rows[r.rows.length - 1].seq;
      }
    });
    emit({ bench: 'event-store', metric: 'readall_events_per_s', value: round(readOurs), unit: 'events/s', baseline: 'raw_select', baseline_value: round(readRaw), events: total });
    const validating = new ValidatingEventStore(store, createEventRegistry());
    const readValidated = await timed(async () => {
      let pos = START;
      let n = 0;
      for (;;) {
        const b = await validating.readAll(pos, 1000);
        if (b.events.length === 0) return n;
        n += b.events.length;
        pos = b.nextPosition;
      }
    });
    emit({ bench: 'event-store', metric: 'readall_validated_events_per_s', value: round(readValidated), unit: 'events/s', baseline: 'raw_select', baseline_value: round(readRaw), events: total });
    await store.close();
  } finally {
    await db.close();
  }
}

main().catch((err) => {
  process.stderr.write(`${err?.stack ?? err}\n`);
  process.exit(1);
});
