import type { QueryConfig } from 'pg';

/**
 * A statement that fails when unanswered for `timeoutMs` (the pool then drops its connection). pg reads
 * `query_timeout` from a query's config too; its types list it only for the client's.
 */
export const timedQuery = (text: string, timeoutMs: number | undefined, values?: unknown[]): QueryConfig =>
  ({ text, values, query_timeout: timeoutMs }) as QueryConfig;
