import type { Pool } from 'pg';
import { timedQuery } from '../../shared/timed-query';

export interface CompanyRateLimit {
  companyId: number;
  perMinute: number;
  setAt: Date;
}

/**
 * Every company's own limit (companies without one have the service default). `queryTimeoutMs`: fail when unanswered
 * that long (the rate limiter's periodic read must not wait on a silent connection).
 */
export async function listCompanyRateLimits(pool: Pool, options: { queryTimeoutMs?: number } = {}): Promise<CompanyRateLimit[]> {
  const text = 'SELECT company_id, per_minute, set_at FROM rm_ratelimits.company_limits ORDER BY company_id';
  const { rows } = await pool.query(timedQuery(text, options.queryTimeoutMs));
  return rows.map((r) => ({ companyId: r.company_id, perMinute: r.per_minute, setAt: r.set_at }));
}
