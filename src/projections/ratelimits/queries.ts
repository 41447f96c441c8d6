import type { Pool, QueryConfig } from 'pg';

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
  // pg reads `query_timeout` from a query's config too; its types list it only for the client's
  const { rows } = await pool.query({ text, query_timeout: options.queryTimeoutMs } as QueryConfig);
  return rows.map((r) => ({ companyId: r.company_id, perMinute: r.per_minute, setAt: r.set_at }));
}
