// The Idempotency-Key mechanism (issue #16, docs/idempotency.md), for routes declaring `config: { idempotent: true }`.
// An `onRoute` hook appends a preHandler after the route's own (so after authentication: the key is scoped to the
// API key's company) and an onSend hook:
//   preHandler: validates the header (400), claims (company, key) with the request's fingerprint, or answers from
//               the record: replay (Idempotent-Replayed: true), 422 for another request under the key, or, while
//               the first is in flight, waits for it (up to IN_FLIGHT_WAIT_MS) and then 409 with Retry-After.
//   onSend:     stores the answer (one UPDATE) unless it is a 5xx, a 400, a 404 or a 429, which release the key (isKept).
// Handlers read `request.idempotencyKey` and make their command's effect idempotent per (company, key).
// A route declaring `idempotent: 'command'` (the single send) gets only the header's validation and the request's
// fingerprint: its command keeps the key's record in its own stream and answers replays, 422 and 409 itself.
import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions, preHandlerHookHandler, onSendHookHandler } from 'fastify';
import { z } from 'zod';
import type { Services } from '../services';
import { requireCompany } from './auth';
import { ApiError } from './errors';
import { IN_FLIGHT_POLL_MS, IN_FLIGHT_WAIT_MS, LEASE_MS } from '../shared/idempotency-key';
import { againOnLostConnection } from '../shared/retry';
import { Wakeups } from '../shared/wakeups';
import { canonicalJson, canonicalJsonInTurns } from '../shared/canonical-json';
import { isLargeBody, Turns } from '../shared/turns';
import { IdempotencyStore, type KeyClaim, type KeyRecord, type StoredAnswer } from './idempotency-store';
import { sealedBox } from '../shared/sealed-box';
import { documentAnswer, type HeaderDocs, withHeaderDocs } from './response-docs';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** true: this module keeps each key's record; 'command': the route's command does (see the top of this file) */
    idempotent?: boolean | 'command';
  }
  interface FastifyRequest {
    /** the validated Idempotency-Key header on an idempotent route; undefined when absent */
    idempotencyKey: string | undefined;
    /** on an idempotent route with a key: the request's fingerprint (fingerprintOf) */
    idempotencyFingerprint: string | undefined;
  }
}

export const IDEMPOTENCY_HEADER = 'idempotency-key';
/** the key the stored answers are sealed under is derived from API_KEY_PEPPER for this purpose */
const IDEMPOTENCY_ANSWERS_PURPOSE = 'idempotency-answers v1';
export { IN_FLIGHT_WAIT_MS, LEASE_MS };
const RENEW_EVERY_MS = LEASE_MS / 3;
const PURGE_EVERY_MS = 10 * 60 * 1000;
const VALID_KEY = /^[\x20-\x7e]{1,255}$/;

interface HeldClaim {
  claim: KeyClaim;
  renewal: NodeJS.Timeout;
  done: boolean;
}

const claims = new WeakMap<FastifyRequest, HeldClaim>();

export const REPLAYED_HEADER = 'idempotent-replayed';
export const keyReusedError = (): ApiError =>
  new ApiError(422, 'This Idempotency-Key was already used with a different request.', 'IDEMPOTENCY_KEY_REUSED');
/** 409 with Retry-After: the seconds until the first request stops counting as in flight (at least 1) */
export function keyInFlightError(reply: FastifyReply, retryAfterS: number): ApiError {
  reply.header('retry-after', String(Math.max(Math.ceil(retryAfterS), 1)));
  return new ApiError(409, 'A request with this Idempotency-Key is still being processed; retry later.', 'IDEMPOTENCY_KEY_IN_FLIGHT');
}

const errorSchema = z.object({ error: z.string() });
const headerDoc = z
  .object({
    [IDEMPOTENCY_HEADER]: z
      .string()
      .optional()
      .describe(
        '1 to 255 printable ASCII characters, sent once, unique per request (a UUID). A repeat with the same key and body within 24 h ' +
          'answers the first answer again (header Idempotent-Replayed: true); the same key with another body is 422; a repeat ' +
          'while the first is in flight waits for it, or answers 409 with Retry-After. 5xx, 400, 404 and 429 answers are not kept.',
      ),
  })
  .loose();

const retryAfterDoc: HeaderDocs = {
  'retry-after': { type: 'integer', description: 'seconds until the first request under the key stops counting as in flight (at least 1)' },
};
const replayedDoc: HeaderDocs = {
  [REPLAYED_HEADER]: {
    type: 'string', enum: ['true'],
    description: 'present when this is the stored answer of an earlier request with the same Idempotency-Key (on a replayed 4xx too)',
  },
};

/**
 * The request's fingerprint (requestFingerprint). A small body (the hot path: keyed single sends) is fingerprinted
 * in one piece, synchronously, as before; a large one (isLargeBody: a 10 MB send-bulk) by requestFingerprintInTurns,
 * which gives the event loop turns and gives the same hex (docs/idempotency.md, "Fingerprint of a large body").
 */
export const fingerprintOf = (request: FastifyRequest): string | Promise<string> =>
  isLargeBody(request.headers, request.body)
    ? requestFingerprintInTurns(request.method, request.routeOptions.url ?? '', request.params ?? {}, request.body ?? null)
    : requestFingerprint(request.method, request.routeOptions.url ?? '', request.params ?? {}, request.body ?? null);

/**
 * Puts fingerprintOf's value on the request: at once for a small body (a string: no await on the keyed single send's
 * hot path), once the returned promise settles for a large one.
 */
function putFingerprint(request: FastifyRequest): Promise<void> | undefined {
  const pending = fingerprintOf(request);
  if (typeof pending !== 'string') return pending.then((fingerprint) => void (request.idempotencyFingerprint = fingerprint));
  request.idempotencyFingerprint = pending;
  return undefined;
}

/** SHA-256 (hex) of a request: method, route, path parameters and body after validation, as canonical JSON */
export const requestFingerprint = (method: string, route: string, params: unknown, body: unknown): string =>
  createHash('sha256').update(`${method} ${route}\n${canonicalJson(params)}\n${canonicalJson(body)}`).digest('hex');

/**
 * requestFingerprint in slices that give the event loop a turn between them: the canonical body is hashed piece by
 * piece as it is written (SHA-256 of the pieces in order = SHA-256 of their concatenation; the pieces are whole
 * JSON tokens, so their UTF-8 is the text's). Same hex as requestFingerprint, for every input.
 */
export async function requestFingerprintInTurns(method: string, route: string, params: unknown, body: unknown, turns: Turns = new Turns()): Promise<string> {
  const hash = createHash('sha256').update(`${method} ${route}\n${canonicalJson(params)}\n`);
  await canonicalJsonInTurns(body, (text) => hash.update(text), turns);
  return hash.digest('hex');
}

/**
 * Whether an answer is kept for replays. Not kept: 5xx (the client may retry), 400 and 404 (the request itself was
 * refused, by its schema or by the handler's own checks, a resource it names included: nothing was done, so the
 * corrected request, or the same one once the resource exists, may reuse the key) and 429 (refused for now: the same
 * request may succeed later).
 */
export const isKept = (status: number): boolean => status < 500 && status !== 400 && status !== 404 && status !== 429;

export function registerIdempotency(app: FastifyInstance, services: Services): void {
  const store = new IdempotencyStore(services.idempotencyPool, sealedBox(services.secrets.apiKeyPepper, IDEMPOTENCY_ANSWERS_PURPOSE));
  // a repeat waiting for the first request in flight is woken when its answer is stored in this process
  const changes = new Wakeups();
  const wake = (companyId: number, key: string) => changes.wake(`${companyId}:${key}`);
  const nextChange = (companyId: number, key: string, ms: number) => changes.next(`${companyId}:${key}`, ms);

  app.decorateRequest('idempotencyKey', undefined);
  app.decorateRequest('idempotencyFingerprint', undefined);

  const answerFrom = (reply: FastifyReply, answer: StoredAnswer) => {
    reply.code(answer.statusCode).header(REPLAYED_HEADER, 'true');
    if (answer.contentType) reply.header('content-type', answer.contentType);
    return reply.send(answer.body);
  };

  /** for `idempotent: 'command'` routes: the command keeps the record */
  const validateOnly: preHandlerHookHandler = async function (request) {
    const key = validKeyOf(request);
    if (key === undefined) return;
    request.idempotencyKey = key;
    return putFingerprint(request);
  };

  const preHandler: preHandlerHookHandler = async function (request, reply) {
    const key = validKeyOf(request);
    if (key === undefined) return;
    request.idempotencyKey = key;
    const { companyId } = requireCompany(request.apiKey!);
    await putFingerprint(request);
    const fingerprint = request.idempotencyFingerprint!;
    const deadline = Date.now() + IN_FLIGHT_WAIT_MS;
    for (;;) {
      const result = await store.claim(companyId, key, fingerprint, services.now(), LEASE_MS);
      if (result.claimed) {
        const { claim } = result;
        const renewal = setInterval(() => {
          store.renew(claim, new Date(services.now().getTime() + LEASE_MS))
            .catch((err) => request.log.warn({ err }, 'idempotency lease renewal failed'));
        }, RENEW_EVERY_MS);
        renewal.unref();
        claims.set(request, { claim, renewal, done: false });
        return;
      }
      const record: KeyRecord = result.record;
      if (record.fingerprint !== fingerprint) throw keyReusedError();
      if (record.state === 'completed') return answerFrom(reply, record.answer);
      const left = deadline - Date.now();
      if (left <= 0) throw keyInFlightError(reply, (record.leaseUntil.getTime() - services.now().getTime()) / 1000);
      // the first request may run in another process: look again every IN_FLIGHT_POLL_MS
      await nextChange(companyId, key, Math.min(left, IN_FLIGHT_POLL_MS));
    }
  };

  const finish = async (request: FastifyRequest, answer: StoredAnswer | undefined) => {
    const claim = claims.get(request);
    if (!claim || claim.done) return;
    claim.done = true;
    clearInterval(claim.renewal);
    // the answer's record (or the release of a 5xx) is tried again when its connection was lost: unrecorded, the keyed
    // retry ran the command again and answered otherwise (an upsert's 201 became 200 `created: false`), an unreleased
    // 5xx held the key for its lease. Both statements name the claim by its time: repeating one that committed changes
    // nothing (review 13, docs/idempotency.md)
    const record = () => (answer ? store.complete(claim.claim, answer) : store.release(claim.claim));
    try {
      await record().catch((first: unknown) => againOnLostConnection(first, record, (err, attempt) => {
        request.log.warn({ err, attempt }, 'recording the idempotency key answer failed; trying again');
      }));
    } catch (err) {
      // the claim's lease runs out and a retry runs the handler again (its command is idempotent per key)
      request.log.error({ err }, 'could not record the idempotency key answer');
    } finally {
      wake(claim.claim.companyId, claim.claim.key);
    }
  };

  const onSend: onSendHookHandler = async function (request, reply, payload) {
    const storable = typeof payload === 'string' || Buffer.isBuffer(payload);
    const status = reply.statusCode;
    const contentType = reply.getHeader('content-type');
    await finish(request, isKept(status) && storable ? {
      statusCode: status,
      contentType: typeof contentType === 'string' ? contentType : null,
      body: Buffer.isBuffer(payload) ? payload.toString('utf8') : (payload as string),
    } : undefined);
    return payload;
  };

  app.addHook('onRoute', (route: RouteOptions) => {
    if (!route.config?.idempotent) return;
    if (route.config.idempotent === 'command') {
      route.preHandler = [...asArray(route.preHandler), validateOnly];
    } else {
      route.preHandler = [...asArray(route.preHandler), preHandler];
      route.onSend = [...asArray(route.onSend), onSend];
      // a request that ended without an answer (client gone before onSend) releases its claim
      route.onResponse = [...asArray(route.onResponse), async (request: FastifyRequest) => finish(request, undefined)];
    }
    const schema = (route.schema ??= {}) as { headers?: unknown; response?: Record<string | number, unknown> };
    schema.headers ??= headerDoc;
    documentAnswers((schema.response ??= {}));
  });

  let closing = false;
  const purge = setInterval(() => {
    store.purgeAllExpired(services.now(), { stopping: () => closing }).catch((err) => app.log.warn({ err }, 'idempotency key purge failed'));
  }, PURGE_EVERY_MS);
  purge.unref();
  app.addHook('onClose', async () => {
    closing = true;
    clearInterval(purge);
  });
}

/**
 * The answers the key adds to a keyed route, in its OpenAPI description (beside the route's own of the same status),
 * and the Idempotent-Replayed header on those of its own a replay can give: its 2xx and the 4xx it keeps (isKept),
 * but for the 401 and 403 of the key's check, which come before the Idempotency-Key is read.
 */
function documentAnswers(response: Record<string | number, unknown>): void {
  const replayable = Object.keys(response).filter((status) => /^[24]\d\d$/.test(status) && isKept(Number(status)) && status !== '401' && status !== '403');
  for (const status of replayable) response[status] = withHeaderDocs(response[status], replayedDoc);
  response[400] ??= errorSchema.describe('the Idempotency-Key is malformed or sent more than once');
  documentAnswer(response, 409, errorSchema, 'a request with this Idempotency-Key is still in flight', retryAfterDoc);
  documentAnswer(response, 422, errorSchema, 'this Idempotency-Key was used with a different request');
}

/** The request's Idempotency-Key, undefined when it has none; 400 when it is malformed or sent more than once. */
function validKeyOf(request: FastifyRequest): string | undefined {
  const raw = request.headers[IDEMPOTENCY_HEADER];
  if (raw === undefined) return undefined;
  // sent twice, Node joins the values with ", ", which could pass for one key
  if (occurrencesOf(request, IDEMPOTENCY_HEADER) > 1) throw new ApiError(400, 'Idempotency-Key must be sent once.');
  if (typeof raw !== 'string' || !VALID_KEY.test(raw)) {
    throw new ApiError(400, 'Idempotency-Key must be 1 to 255 printable ASCII characters.');
  }
  return raw;
}

/** How many times a header (lower-case name) was sent. */
function occurrencesOf(request: FastifyRequest, name: string): number {
  const raw = request.raw.rawHeaders;
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i].length === name.length && raw[i].toLowerCase() === name) n++;
  return n;
}

function asArray<T>(value: T | T[] | undefined): T[] {
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}
