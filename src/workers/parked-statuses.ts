// Parked provider statuses (docs/sends.md, "Delivery consumer"): statuses whose provider message id had no known
// owner after the delivery consumer's short in-place wait. They are written to `public.parked_provider_statuses`
// (migration 0011) before the record's offset is committed, so nothing acknowledged is lost and the partition moves
// on; the sweeper (parked-status-sweeper.ts) applies them once the owner is known, or dead-letters them after the
// grace period. This module holds the table's statements only (no owner lookup, no appliers).
import type { Pool } from 'pg';
import type { IncomingRecord } from '../ports/transport';
import type { ProviderStatusUpdate } from '../commands/delivery-status';

export const PARKED_STATUSES_TABLE = 'public.parked_provider_statuses';

/** A branch of the owner query (same columns as the owner rows): one row per provider id with parked statuses. */
export const PARKED_IDS_SELECT = `
SELECT DISTINCT provider_message_id, 9 AS rank, 'parked' AS kind, NULL::text, NULL::int, NULL::text, NULL::int
  FROM ${PARKED_STATUSES_TABLE} WHERE provider_message_id = ANY($1::text[])`;

export interface StatusToPark {
  record: IncomingRecord;
  update: ProviderStatusUpdate;
}

/**
 * Parks statuses in the given order (one statement). A status parked already (same provider id, status and
 * provider timestamp: a redelivered record) keeps its row, its place and its first-seen time.
 */
export async function parkStatuses(pool: Pool, items: readonly StatusToPark[]): Promise<void> {
  if (items.length === 0) return;
  const seen = new Set<string>();
  const ids: string[] = [];
  const statuses: string[] = [];
  const timestamps: string[] = [];
  const records: string[] = [];
  for (const { record, update } of items) {
    const identity = JSON.stringify([update.providerMessageId, update.status, update.timestamp]);
    if (seen.has(identity)) continue;
    seen.add(identity);
    ids.push(update.providerMessageId);
    statuses.push(update.status);
    timestamps.push(update.timestamp);
    records.push(JSON.stringify({
      topic: record.topic, key: record.key, value: record.value, headers: record.headers ?? {}, partition: record.partition, offset: record.offset,
    }));
  }
  await pool.query(
    `INSERT INTO ${PARKED_STATUSES_TABLE} (provider_message_id, status, status_timestamp, record)
     SELECT id, status, ts, record FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS p(id, status, ts, record, n)
      ORDER BY n
     ON CONFLICT (provider_message_id, status, status_timestamp) DO NOTHING`,
    [ids, statuses, timestamps, records],
  );
}

/** Whether statuses of this provider id are parked (a later status of it is then parked after them). */
export async function hasParkedStatuses(pool: Pool, providerMessageId: string): Promise<boolean> {
  const r = await pool.query<{ parked: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM ${PARKED_STATUSES_TABLE} WHERE provider_message_id = $1) AS parked`,
    [providerMessageId],
  );
  return r.rows[0].parked;
}

export interface ParkedRow {
  seq: string;
  providerMessageId: string;
  record: IncomingRecord;
  /** older than the grace period (by the database's clock, as `first_seen`) */
  expired: boolean;
}

/** Up to `limit` parked statuses parked after `afterSeq` ('0': from the oldest), in parking order. */
export async function parkedAfter(pool: Pool, afterSeq: string, graceMs: number, limit: number): Promise<ParkedRow[]> {
  const r = await pool.query<{ seq: string; provider_message_id: string; record: string; expired: boolean }>(
    `SELECT seq::text AS seq, provider_message_id, record, first_seen <= now() - make_interval(secs => $1::double precision / 1000) AS expired
       FROM ${PARKED_STATUSES_TABLE} WHERE seq > $3::bigint ORDER BY seq LIMIT $2`,
    [graceMs, limit, afterSeq],
  );
  return r.rows.map((row) => ({ seq: row.seq, providerMessageId: row.provider_message_id, record: JSON.parse(row.record) as IncomingRecord, expired: row.expired }));
}

/** The statuses of these provider ids parked before `beforeSeq`, in parking order. */
export async function parkedBefore(pool: Pool, providerMessageIds: readonly string[], beforeSeq: string, graceMs: number): Promise<ParkedRow[]> {
  if (providerMessageIds.length === 0) return [];
  const r = await pool.query<{ seq: string; provider_message_id: string; record: string; expired: boolean }>(
    `SELECT seq::text AS seq, provider_message_id, record, first_seen <= now() - make_interval(secs => $1::double precision / 1000) AS expired
       FROM ${PARKED_STATUSES_TABLE} WHERE provider_message_id = ANY($2::text[]) AND seq < $3::bigint ORDER BY seq`,
    [graceMs, providerMessageIds, beforeSeq],
  );
  return r.rows.map((row) => ({ seq: row.seq, providerMessageId: row.provider_message_id, record: JSON.parse(row.record) as IncomingRecord, expired: row.expired }));
}

export async function deleteParked(pool: Pool, seq: string): Promise<void> {
  await pool.query(`DELETE FROM ${PARKED_STATUSES_TABLE} WHERE seq = $1::bigint`, [seq]);
}
