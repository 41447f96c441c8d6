import type { Pool } from 'pg';

export interface CompanyRateLimit {
  companyId: number;
  perMinute: number;
  setAt: Date;
}

/** Every company's own limit (companies without one have the service default). */
export async function listCompanyRateLimits(pool: Pool): Promise<CompanyRateLimit[]> {
  const { rows } = await pool.query('SELECT company_id, per_minute, set_at FROM rm_ratelimits.company_limits ORDER BY company_id');
  return rows.map((r) => ({ companyId: r.company_id, perMinute: r.per_minute, setAt: r.set_at }));
}
