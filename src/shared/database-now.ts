import type { Pool } from 'pg';

/** Postgres's clock: what the statements' `now()` compare with (docs/reliability.md, "Clocks of several processes"). */
export async function databaseNow(pool: Pick<Pool, 'query'>): Promise<Date> {
  const { rows } = await pool.query<{ now: Date }>('SELECT now() AS now');
  return rows[0].now;
}
