// Webhook ingress of the messaging provider (ARCHITECTURE section 7), in the provider's format.
//   GET  /webhooks/provider  verification handshake: hub.mode=subscribe and hub.verify_token equal to
//                            PROVIDER_VERIFY_TOKEN (constant-time compare) → 200 with hub.challenge as text; anything else 403.
//   POST /webhooks/provider  X-Hub-Signature-256 must be `sha256=` + HMAC-SHA256(raw body, PROVIDER_APP_SECRET)
//                            (constant-time compare; or with PROVIDER_APP_SECRET_PREVIOUS during a reset), else 401 and nothing is published. The body's
//                            statuses[] and messages[] become records on `provider.webhooks` (key: provider
//                            message id / sender); the 200 is sent only once the publish is acknowledged
//                            (Kafka acks=-1; in-process: handlers done), so nothing is lost after a 200.
//                            A failed publish answers 503: the provider delivers again (consumers are
//                            idempotent). A record the transport can never carry (one status or message
//                            over Kafka's produce cap) would fail every delivery again, so it is
//                            dead-lettered as a reference instead (see publishNotifications) and the rest
//                            of the body is published: 200.
// The raw body is needed for the signature: this plugin's scope replaces the body parsers with one that
// keeps the bytes; the JSON is parsed only after the signature was checked.
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { deadLetterHeaders, dlqTopic, type OutgoingRecord, RecordTooLargeError } from '../../ports/transport';
import type { Services } from '../../services';
import { PROVIDER_WEBHOOK_TOPIC, splitWebhook, verifyTokenMatches, verifyWebhookSignature } from '../../shared/provider-webhook';
import { ApiError, badRequest, forbidden, unauthorized } from '../errors';

export const WEBHOOK_BODY_LIMIT = 4 * 1024 * 1024;

export function registerWebhookRoutes(app: FastifyInstance, services: Services): void {
  app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: WEBHOOK_BODY_LIMIT }, (_request, body, done) => done(null, body));

    scope.get('/webhooks/provider', { schema: { hide: true }, config: { errorShape: 'plain' } }, async (request, reply) => {
      const q = (request.query ?? {}) as Record<string, unknown>;
      const expected = services.config.provider.verifyToken;
      const token = q['hub.verify_token'];
      const challenge = q['hub.challenge'];
      if (!expected || q['hub.mode'] !== 'subscribe' || typeof token !== 'string' || !verifyTokenMatches(expected, token)) {
        throw forbidden('webhook verification failed');
      }
      return reply.type('text/plain; charset=utf-8').send(typeof challenge === 'string' ? challenge : '');
    });

    scope.post('/webhooks/provider', { schema: { hide: true }, config: { errorShape: 'plain' } }, async (request) => {
      const raw = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      const secret = services.config.provider.appSecret;
      if (!secret) {
        request.log.warn('provider webhook refused: PROVIDER_APP_SECRET is not configured');
        throw unauthorized('webhook signature cannot be verified');
      }
      const header = request.headers['x-hub-signature-256'];
      const signature = Array.isArray(header) ? header[0] : header;
      const previous = services.config.provider.appSecretPrevious;
      if (!verifyWebhookSignature(secret, raw, signature) && !(previous && verifyWebhookSignature(previous, raw, signature))) {
        throw unauthorized('invalid or missing X-Hub-Signature-256');
      }
      let payload: unknown;
      try {
        payload = JSON.parse(raw.toString('utf8'));
      } catch {
        throw badRequest('request body is not valid JSON');
      }
      const records = splitWebhook(payload, services.now().toISOString());
      if (!records) throw badRequest('not a provider notification: `entry` array missing');
      if (records.length > 0) {
        try {
          await publishNotifications(services, records, request.log);
        } catch (err) {
          request.log.error({ err, records: records.length }, 'publishing provider notifications failed');
          throw new ApiError(503, 'notifications could not be accepted right now; retry later', 'UNAVAILABLE');
        }
      }
      return { received: records.length };
    });
  });
}

/** Longest identifying text a too-large record's reference keeps of each field (the field may be what is too large). */
const REFERENCE_TEXT_MAX = 256;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const clip = (v: unknown): string | null =>
  typeof v === 'string' || typeof v === 'number' ? String(v).slice(0, REFERENCE_TEXT_MAX) : null;

/**
 * Publishes a webhook's records. The records the transport refuses as too large for good are dead-lettered on
 * `provider.webhooks.dlq` as references (kind, ids, size: what an operator needs to look the notification up at
 * the provider), logged and counted; the other records are published as usual. Anything else fails the publish.
 */
async function publishNotifications(services: Services, records: OutgoingRecord[], log: FastifyBaseLogger): Promise<void> {
  try {
    await services.transport.publish(PROVIDER_WEBHOOK_TOPIC, records);
    return;
  } catch (err) {
    if (!(err instanceof RecordTooLargeError) || err.records.length === 0) throw err;
    const tooLarge = new Set(err.records);
    const references = records.filter((_, i) => tooLarge.has(i)).map(tooLargeReference);
    await Promise.all([
      services.transport.publish(PROVIDER_WEBHOOK_TOPIC, records.filter((_, i) => !tooLarge.has(i))),
      services.transport.publish(dlqTopic(PROVIDER_WEBHOOK_TOPIC), references),
    ]);
    for (const reference of references) {
      services.metrics.deadLetters.labels(PROVIDER_WEBHOOK_TOPIC).inc();
      log.warn({ topic: PROVIDER_WEBHOOK_TOPIC, notification: withoutCustomerPhone(reference.value), reason: reference.headers?.['x-dlq-reason'] }, 'provider notification too large for the transport: dead-lettered as a reference');
    }
  }
}

/**
 * The reference as the log shows it: without the customer's phone number (a status's `recipientId`, a message's
 * `from`), which only the dead-letter record keeps (docs/reliability.md, "What is logged (2026-11-28)").
 */
function withoutCustomerPhone(reference: unknown): unknown {
  if (!isObject(reference)) return reference;
  const { recipientId: _recipientId, from: _from, ...rest } = reference;
  return rest;
}

/** A reference to a record too large to be carried: its key, identifying fields and size, with the reason. */
function tooLargeReference(record: OutgoingRecord): OutgoingRecord {
  const value = isObject(record.value) ? record.value : {};
  const item = isObject(value.status) ? value.status : isObject(value.message) ? value.message : {};
  const bytes = Buffer.byteLength(JSON.stringify(record.value ?? null));
  const kind = value.kind === 'message' ? 'message' : 'status';
  const id = clip(item.id);
  const reference = {
    kind,
    phoneNumberId: clip(value.phoneNumberId),
    displayPhoneNumber: clip(value.displayPhoneNumber),
    id,
    ...(kind === 'status' ? { status: clip(item.status), recipientId: clip(item.recipient_id) } : { from: clip(item.from), type: clip(item.type) }),
    timestamp: clip(item.timestamp),
    receivedAt: value.receivedAt ?? null,
    bytes,
  };
  const reason = `${kind} ${JSON.stringify(id)} is ${bytes} bytes: too large for the transport, only this reference to it is kept`;
  return {
    key: record.key === null ? null : record.key.slice(0, REFERENCE_TEXT_MAX),
    value: reference,
    headers: deadLetterHeaders({}, reason, { topic: PROVIDER_WEBHOOK_TOPIC }),
  };
}
