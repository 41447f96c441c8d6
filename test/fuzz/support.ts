import type { FastifyInstance, InjectOptions } from 'fastify';
import type { Pool } from 'pg';
import { countEvents } from '../support/provisioning';

// Shared checks of the fuzz and isolation suites: every answer is a 2xx or a documented 4xx in the spec's body
// shape for the route family, never a 5xx, never a hang; a rejected request appends nothing to the event log.

/** Statuses the service documents (spec + docs/*.md) for client mistakes. */
export const DOCUMENTED_4XX = new Set([400, 401, 403, 404, 405, 409, 413, 414, 415, 422, 429]);

/** Hang guard: a response that never comes is a failure, not a slow test (not a speed threshold). */
export const HANG_GUARD_MS = 20_000;

export type Family = 'export' | 'fields' | 'plain' | 'webhook';

export function familyOf(url: string): Family {
  const path = url.split('?')[0];
  if (path.startsWith('/api/v1/qualitative-export/')) return 'export';
  if (path.startsWith('/webhooks/')) return 'webhook';
  if (/^\/api\/v1\/platform-templates\/(send\/|send-bulk\/|bulk-sends\/)/.test(path)) return 'fields';
  return 'plain';
}

const isStr = (v: unknown): v is string => typeof v === 'string';
const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Returns a description of what is wrong with an error body, or undefined when it has the family's shape. */
export function shapeProblem(family: Family, status: number, body: unknown): string | undefined {
  if (!isObj(body)) return 'error body is not a JSON object';
  const keys = Object.keys(body);
  const plain = keys.length === 1 && isStr(body.error);
  switch (family) {
    case 'export': {
      const e = body.error;
      return keys.length === 1 && isObj(e) && isStr(e.code) && isStr(e.message) && Object.keys(e).length === 2
        ? undefined : 'expected {error:{code,message}}';
    }
    case 'plain':
    case 'webhook':
      return plain ? undefined : 'expected {error: string}';
    case 'fields': {
      if (plain) return undefined;
      if (keys.length === 1 && isStr(body.detail)) return status === 404 ? undefined : '{detail} only with 404';
      if (status === 400 && keys.length > 0 && keys.every((k) => Array.isArray(body[k]) && (body[k] as unknown[]).length > 0 && (body[k] as unknown[]).every(isStr))) {
        return undefined;
      }
      return 'expected {error}, {detail} or {field:[messages]}';
    }
  }
}

export interface Checked {
  statusCode: number;
  body: string;
  headers: Record<string, unknown>;
  json(): any;
}

function describeRequest(o: InjectOptions): string {
  const payload = typeof o.payload === 'string' ? o.payload : o.payload === undefined ? '' : JSON.stringify(o.payload);
  const shown = payload.length > 300 ? `${payload.slice(0, 300)}… (${payload.length} chars)` : payload;
  const url = String(o.url);
  return `${o.method} ${url.length > 300 ? `${url.slice(0, 300)}…` : url} headers=${JSON.stringify(o.headers ?? {}).slice(0, 300)} body=${shown}`;
}

/**
 * Injects a request with a hang guard and checks the invariants. Throws (with the request described) on a 5xx,
 * an undocumented status, a wrong error shape, or an event appended by a rejected request.
 */
export async function checkedInject(app: FastifyInstance, pool: Pool, o: InjectOptions): Promise<Checked> {
  const before = await countEvents(pool);
  let timer: NodeJS.Timeout | undefined;
  const guard = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no response within ${HANG_GUARD_MS} ms (hang): ${describeRequest(o)}`)), HANG_GUARD_MS);
  });
  let res;
  try {
    res = await Promise.race([app.inject(o), guard]);
  } finally {
    clearTimeout(timer);
  }
  const status = res.statusCode;
  const what = () => `${status} ${res.body.slice(0, 400)} for ${describeRequest(o)}`;
  if (status >= 500) throw new Error(`5xx: ${what()}`);
  if (status >= 300 && status < 400) throw new Error(`unexpected redirect: ${what()}`);
  if (status >= 400) {
    if (!DOCUMENTED_4XX.has(status)) throw new Error(`undocumented status: ${what()}`);
    let parsed: unknown;
    try {
      parsed = JSON.parse(res.body);
    } catch {
      throw new Error(`error body is not JSON: ${what()}`);
    }
    const problem = shapeProblem(familyOf(String(o.url)), status, parsed);
    if (problem) throw new Error(`${problem}: ${what()}`);
    // docs/sends.md: a provider's refusal of a send is recorded (its request and the rejection), then answered 422
    const recordedRefusal = status === 422 && typeof (parsed as { error?: unknown }).error === 'string'
      && ((parsed as { error: string }).error).startsWith('The provider refused the message');
    const after = await countEvents(pool);
    if (after !== before && !recordedRefusal) throw new Error(`a rejected request appended ${after - before} event(s): ${what()}`);
  }
  return { statusCode: status, body: res.body, headers: res.headers as Record<string, unknown>, json: () => JSON.parse(res.body) };
}
