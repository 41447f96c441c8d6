import type { Pool } from 'pg';
import { withTransaction } from '../../shared/tx';

// Generated contact ids: integers from a Postgres sequence (schema `contact_ids`, outside every read model, so a
// projection rebuild never resets it), taken ID_BLOCK at a time per process (one round trip per block; ids a
// process took but did not use are gaps). Fixture contacts keep their given ids; seeding moves the sequence past
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

const ID_BLOCK = 32;
/** ids taken from the sequence and not handed out yet, per pool */
const blocks = new WeakMap<Pool, { ids: number[]; refill?: Promise<void> }>();

export async function nextContactId(pool: Pool): Promise<number> {
  let block = blocks.get(pool);
  if (!block) blocks.set(pool, (block = { ids: [] }));
  while (block.ids.length === 0) {
    if (!block.refill) {
      const b = block;
      b.refill = (async () => {
        await ensureSequence(pool);
        const r = await pool.query<{ id: number }>({
          name: 'contact_next_ids',
          text: `SELECT nextval('${SEQUENCE}')::integer AS id FROM generate_series(1, $1::integer) ORDER BY 1`,
          values: [ID_BLOCK],
        });
        b.ids.push(...r.rows.map((row) => row.id));
      })().finally(() => (b.refill = undefined));
    }
    await block.refill;
  }
  return block.ids.shift()!;
}

/** Makes sure generated ids are above `id` (fixture contacts keep their own ids). */
export async function reserveContactIdsUpTo(pool: Pool, id: number): Promise<void> {
  const block = blocks.get(pool);
  if (block) block.ids = block.ids.filter((x) => x > id);
  await ensureSequence(pool);
  await pool.query(
    `SELECT setval('${SEQUENCE}', GREATEST($1::bigint, (SELECT last_value FROM ${SEQUENCE})), true)`,
    [id],
  );
}
