import type { Pool } from 'pg';
import { withTransaction } from '../../shared/tx';

// Generated contact ids: integers from a Postgres sequence (schema `contact_ids`, outside every read model, so a
// projection rebuild never resets it). Fixture contacts keep their given ids; seeding moves the sequence past
// them, and the handler skips any id whose contact stream already exists.

const SEQUENCE = 'contact_ids.contact_id_seq';
const ensured = new WeakMap<Pool, Promise<void>>();

function ensureSequence(pool: Pool): Promise<void> {
  let p = ensured.get(pool);
  if (!p) {
    p = withTransaction(pool, async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(hashtext('contact_ids'))`);
      await tx.query('CREATE SCHEMA IF NOT EXISTS contact_ids');
      await tx.query(`CREATE SEQUENCE IF NOT EXISTS ${SEQUENCE} AS integer START 1`);
    });
    p.catch(() => ensured.delete(pool));
    ensured.set(pool, p);
  }
  return p;
}

export async function nextContactId(pool: Pool): Promise<number> {
  await ensureSequence(pool);
  const r = await pool.query<{ id: number }>({ name: 'contact_next_id', text: `SELECT nextval('${SEQUENCE}')::integer AS id` });
  return r.rows[0].id;
}

/** Makes sure generated ids are above `id` (fixture contacts keep their own ids). */
export async function reserveContactIdsUpTo(pool: Pool, id: number): Promise<void> {
  await ensureSequence(pool);
  await pool.query(
    `SELECT setval('${SEQUENCE}', GREATEST($1::bigint, (SELECT last_value FROM ${SEQUENCE})), true)`,
    [id],
  );
}
