import { finished, type Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Services } from '../../services';
import { parseIsoInstant } from '../../shared/iso-instant';
import { isStorableInstant } from '../../shared/storable';
import { ExportCursorCodec, type CursorState, type ExportFilters } from '../../projections/conversations/export-cursor';
import { CHANNEL_GROUPS, type ExportInclude, openMessageExport } from '../../projections/conversations/export';
import { ApiError, throwUnlessOnlyMissing } from '../errors';
import { EXPORT_MAX_STALL_MS, EXPORT_RETRY_AFTER_S, ExportAdmission, tooManyExports } from '../export-admission';

// GET /api/v1/qualitative-export/messages (spec: "Exported message record", export errors; docs/export.md).

export const EXPORT_PATH = '/api/v1/qualitative-export/messages';
export const MAX_RANGE_MS = 31 * 24 * 60 * 60 * 1000;
export const DEFAULT_LIMIT = 5000;
export const MAX_LIMIT = 10_000;
export const MAX_COMPANIES = 100;
export const MAX_AGENTS = 1000;
const INCLUDE_VALUES = ['classifications', 'extractions', 'tool_calls', 'trace_id'] as const;

// company_id, from and to are required (documented so); a missing one is parseExportQuery's own 400, naming it
const querystring = z.object({
  company_id: z.string().describe('one company id, or a comma-separated list (global keys)'),
  from: z.string().describe('ISO 8601, inclusive; year 0001 to 9999 in UTC'),
  to: z.string().describe('ISO 8601, exclusive; after `from`, at most 31 days later; year 0001 to 9999 in UTC'),
  channel: z.string().optional().meta({ enum: ['msgapp', 'photoapp', 'socialmsg', 'all'], description: 'msgapp, photoapp, socialmsg or all (default)' }),
  agent_id: z.string().optional().describe('AI agent id, or a comma-separated list: only messages those agents wrote'),
  direction: z.string().optional().meta({ enum: ['incoming', 'outgoing', 'all'], description: 'incoming, outgoing or all (default)' }),
  include: z.string().optional().describe('CSV of classifications, extractions, tool_calls, trace_id (default: classifications)'),
  cursor: z.string().optional().describe('`next_cursor` of the previous page'),
  limit: z.string().optional().meta({ type: 'integer', minimum: 1, maximum: 10000, description: 'rows per page, 1-10000 (default 5000)' }),
});
type Query = Partial<z.infer<typeof querystring>>;

const exportError = (what: string) => z.object({ error: z.object({ code: z.string(), message: z.string() }) }).describe(what);
/**
 * The export's answers in the OpenAPI document: the NDJSON page (streamed: never serialized through a schema) and its
 * refusals in the export's `{error: {code, message}}` shape (the rate limit's 429 is added to the 429 by rate-limit.ts).
 */
const responses = {
  200: {
    description: 'one exported message record per line, optionally ending with the _truncated sentinel or an _error line',
    content: { 'application/x-ndjson': { schema: z.string().describe('NDJSON: one JSON object per line') } },
  },
  400: exportError('INVALID_PARAMETER: a parameter is missing or invalid, e.g. from not less than to'),
  401: exportError('AUTH_REQUIRED: the API key is missing, invalid, revoked or expired'),
  403: exportError('COMPANY_ACCESS_DENIED: the key has no access to a requested company_id'),
  429: exportError('TOO_MANY_EXPORTS: too many pages streaming at once, for the key or the service (Retry-After)')
    .meta({ headers: { 'retry-after': { type: 'integer', description: 'seconds to wait before asking again' } } }),
};

const invalid = (message: string) => new ApiError(400, message, 'INVALID_PARAMETER');

export interface ParsedExportQuery {
  filters: ExportFilters;
  include: ExportInclude;
  limit: number;
  cursor: string | undefined;
}

function idList(name: string, raw: string, max: number): number[] {
  const parts = raw.split(',').map((p) => p.trim());
  if (parts.some((p) => !/^\d{1,10}$/.test(p))) throw invalid(`${name} must be an integer or a comma-separated list of integers`);
  const ids = [...new Set(parts.map(Number))].sort((a, b) => a - b);
  if (ids.some((id) => id < 1 || id > 2_147_483_647)) throw invalid(`${name} values must be integers from 1 to 2147483647`);
  if (ids.length > max) throw invalid(`${name} lists at most ${max} values`);
  return ids;
}

/**
 * ISO 8601 instant: `YYYY-MM-DD` (midnight UTC) or `YYYY-MM-DDTHH:MM[:SS[.fff]]` with `Z`, `±HH[:MM]` or no
 * zone (UTC). A `+` that the query string decoded into a space is accepted. Millisecond precision.
 */
export const parseInstant = (raw: string): Date | undefined => parseIsoInstant(raw, { zone: 'utc-if-missing' });

/** A required `from` or `to`: ISO 8601 (parseInstant) and an instant Postgres can store (year 1 to 9999, UTC). */
function instantParam(name: 'from' | 'to', raw: string | undefined): Date {
  if (!raw) throw invalid(`${name} is required (ISO 8601)`);
  const at = parseInstant(raw);
  if (!at) throw invalid(`${name} must be an ISO 8601 date or date-time`);
  if (!isStorableInstant(at)) throw invalid(`${name} must be an instant from year 0001 to 9999 (UTC)`);
  return at;
}

const trimmed = (value: string | undefined): string | undefined => (value === undefined ? undefined : value.trim());

/** Every query rule of the spec; each violation is a 400 INVALID_PARAMETER that names the parameter. */
export function parseExportQuery(q: Query): ParsedExportQuery {
  const companyRaw = trimmed(q.company_id);
  if (!companyRaw) throw invalid('company_id is required');
  const companyIds = idList('company_id', companyRaw, MAX_COMPANIES);

  const from = instantParam('from', trimmed(q.from));
  const to = instantParam('to', trimmed(q.to));
  if (from.getTime() >= to.getTime()) throw invalid('from must be earlier than to');
  if (to.getTime() - from.getTime() > MAX_RANGE_MS) throw invalid('from..to spans more than 31 days: to must be at most 31 days after from');

  let limit = DEFAULT_LIMIT;
  const limitRaw = trimmed(q.limit);
  if (limitRaw !== undefined) {
    if (!/^\d{1,6}$/.test(limitRaw) || Number(limitRaw) < 1 || Number(limitRaw) > MAX_LIMIT) {
      throw invalid(`limit must be an integer from 1 to ${MAX_LIMIT}`);
    }
    limit = Number(limitRaw);
  }

  const channelRaw = trimmed(q.channel) || 'all';
  if (channelRaw !== 'all' && !Object.hasOwn(CHANNEL_GROUPS, channelRaw)) throw invalid('channel must be one of msgapp, photoapp, socialmsg, all');
  const channels = channelRaw === 'all' ? null : CHANNEL_GROUPS[channelRaw as keyof typeof CHANNEL_GROUPS];

  const directionRaw = trimmed(q.direction) || 'all';
  if (!['incoming', 'outgoing', 'all'].includes(directionRaw)) throw invalid('direction must be one of incoming, outgoing, all');
  const direction = directionRaw === 'incoming' ? 'inbound' : directionRaw === 'outgoing' ? 'outbound' : null;

  const agentRaw = trimmed(q.agent_id);
  const agentIds = agentRaw ? idList('agent_id', agentRaw, MAX_AGENTS) : null;

  const include: ExportInclude = { classifications: true, extractions: false, toolCalls: false, traceId: false };
  if (q.include !== undefined) {
    include.classifications = false;
    for (const item of q.include.split(',').map((s) => s.trim()).filter(Boolean)) {
      switch (item) {
        case 'classifications': include.classifications = true; break;
        case 'extractions': include.extractions = true; break;
        case 'tool_calls': include.toolCalls = true; break;
        case 'trace_id': include.traceId = true; break;
        default:
          throw invalid(`include has an unknown value ${JSON.stringify(item.slice(0, 50))}: use a CSV of ${INCLUDE_VALUES.join(', ')}`);
      }
    }
  }

  const cursor = trimmed(q.cursor) || undefined;
  return { filters: { companyIds, from, to, channels, direction, agentIds }, include, limit, cursor };
}

export function registerExportRoutes(app: FastifyInstance, services: Services): void {
  const cursors = new ExportCursorCodec(services.secrets.anonymizationSecret);
  const admission = new ExportAdmission(services.config.export);
  app.withTypeProvider<ZodTypeProvider>().get(
    EXPORT_PATH,
    {
      schema: {
        operationId: 'exportMessages', summary: 'Export chat messages as anonymized NDJSON (application/x-ndjson)',
        description:
          'One exported message record per line, in (occurred_at, company) order; when more rows exist the last line is ' +
          '{"_truncated":true,"next_cursor":"…"}: repeat the request with cursor=<next_cursor>. A failure after streaming ' +
          'began ends the stream with {"_error":{"code":"…","message":"…"}}. Too many pages streaming at once (for the key ' +
          'or the service) is an immediate 429 TOO_MANY_EXPORTS with Retry-After.',
        tags: ['export'],
        querystring,
        response: responses,
      },
      config: { errorShape: 'export' },
      attachValidation: true,
      // authentication first: a request without a key is 401 whatever its parameters
      onRequest: async (request) => {
        await app.authenticate(request, 'any');
      },
    },
    async (request, reply) => {
      const key = request.apiKey!;
      throwUnlessOnlyMissing(request, querystring);
      const q = parseExportQuery(request.query as Query);
      if (key.scope !== 'global') {
        const denied = q.filters.companyIds.find((id) => id !== key.companyId);
        if (denied !== undefined) throw new ApiError(403, `this API key has no access to company ${denied}`, 'COMPANY_ACCESS_DENIED');
      }
      let cursor: CursorState | undefined;
      if (q.cursor !== undefined) {
        cursor = cursors.decode(q.cursor, q.filters);
        if (!cursor) {
          throw invalid('cursor is invalid: it was altered, or it belongs to a query with other company_id, from, to, channel, direction or agent_id');
        }
      }
      // only a request that is otherwise valid takes a slot, and before any database work
      const admitted = admission.tryAdmit(key.keyId);
      if (!admitted.admitted) {
        reply.header('retry-after', String(EXPORT_RETRY_AFTER_S));
        throw tooManyExports(admitted.limit, admission.limits);
      }
      const { slot } = admitted;
      let stream: Readable;
      try {
        stream = await openMessageExport(
          { pool: services.exportPool, anonymizationSecret: services.secrets.anonymizationSecret, cursors, now: services.now, logger: request.log },
          { filters: q.filters, include: q.include, limit: q.limit, cursor },
        );
      } catch (err) {
        slot.release();
        throw err;
      }
      // 'close' comes after the page ended, failed or was destroyed; the response closing, however it closes,
      // destroys the page (a no-op once it ended), so the slot cannot outlive the request
      stream.once('close', slot.release);
      finished(reply.raw, () => stream.destroy());
      // A pause of the client is the page's pause (backpressure): the server's connection timeout (30 s) would cut
      // it, so the page has its own bound; past it the connection is closed, which ends the page as above.
      const maxStallMs = admission.limits.maxStallMs ?? EXPORT_MAX_STALL_MS;
      reply.raw.setTimeout(maxStallMs, () => {
        request.log.warn({ maxStallMs }, 'export page ended: its client read nothing for the export bound');
        reply.raw.destroy();
      });
      reply.header('content-type', 'application/x-ndjson');
      reply.header('cache-control', 'no-store');
      return reply.send(stream as never); // streamed as is: the 200's schema documents it, never serializes it
    },
  );
}
