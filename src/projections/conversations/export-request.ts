// The export's request (filters, included fields, page size, cursor), what it runs with (pool, secret, cursor
// codec, clock, logger), and the channel groups a request's channel filter can name.
import { type Pool } from 'pg';
import { type CursorState, type ExportCursorCodec, type ExportFilters } from './export-cursor';

export interface ExportInclude {
  classifications: boolean;
  extractions: boolean;
  toolCalls: boolean;
  traceId: boolean;
}

export interface ExportRequest {
  filters: ExportFilters;
  include: ExportInclude;
  /** rows per page, 1-10000 */
  limit: number;
  /** the decoded cursor of the previous page */
  cursor?: CursorState;
}

export interface ExportLogger {
  error(obj: object, msg?: string): void;
}

export interface ExportDeps {
  pool: Pool;
  anonymizationSecret: string;
  cursors: ExportCursorCodec;
  now: () => Date;
  logger?: ExportLogger;
  /** rows per FETCH (default 1000) */
  fetchSize?: number;
}

export const CHANNEL_GROUPS: Record<'msgapp' | 'photoapp' | 'socialmsg', string[]> = {
  msgapp: ['PROVIDER_MSGAPP', 'MSGAPP_GATEWAY', 'FLOWTOOL_MSGAPP'],
  photoapp: ['PHOTOAPP', 'FLOWTOOL_PHOTOAPP'],
  socialmsg: ['SOCIALMSG'],
};
