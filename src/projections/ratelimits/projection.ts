import type { Projection } from '../projection';
import type { CompanyEvent } from '../../events/provisioning';

// The request limit per API key and minute each company has been given by an operator (docs/rate-limits.md);
// a company without a row has the service default (RATE_LIMIT_PER_MINUTE).

export const rateLimitsProjection: Projection = {
  name: 'ratelimits',
  version: 1,
  schema: 'rm_ratelimits',
  handles: ['CompanyRateLimitSet'],
  ddl: `
    CREATE TABLE IF NOT EXISTS company_limits (
      company_id integer PRIMARY KEY,
      per_minute integer NOT NULL,
      set_at     timestamptz NOT NULL
    );`,
  async apply(tx, event) {
    const e = { type: event.type, data: event.data } as Extract<CompanyEvent, { type: 'CompanyRateLimitSet' }>;
    if (e.data.perMinute === null) {
      await tx.query('DELETE FROM company_limits WHERE company_id = $1', [e.data.companyId]);
      return;
    }
    await tx.query(
      `INSERT INTO company_limits (company_id, per_minute, set_at) VALUES ($1, $2, $3)
       ON CONFLICT (company_id) DO UPDATE SET per_minute = EXCLUDED.per_minute, set_at = EXCLUDED.set_at`,
      [e.data.companyId, e.data.perMinute, event.metadata.at],
    );
  },
};
