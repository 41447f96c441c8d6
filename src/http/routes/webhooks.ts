// Webhook ingress of the messaging provider (ARCHITECTURE section 7), in the provider's format.
//   GET  /webhooks/provider  verification handshake: hub.mode=subscribe and hub.verify_token equal to
//                            PROVIDER_VERIFY_TOKEN → 200 with hub.challenge as text; anything else 403.
//   POST /webhooks/provider  X-Hub-Signature-256 must be `sha256=` + HMAC-SHA256(raw body, PROVIDER_APP_SECRET)
//                            (constant-time compare), else 401 and nothing is published. The body's
//                            statuses[] and messages[] become records on `provider.webhooks` (key: provider
//                            message id / sender); the 200 is sent only once the publish is acknowledged
//                            (Kafka acks=-1; in-process: handlers done), so nothing is lost after a 200.
//                            A failed publish answers 503: the provider delivers again (consumers are
//                            idempotent).
// The raw body is needed for the signature: this plugin's scope replaces the body parsers with one that
// keeps the bytes; the JSON is parsed only after the signature was checked.
import type { FastifyInstance } from 'fastify';
import type { Services } from '../../services';
import { PROVIDER_WEBHOOK_TOPIC, splitWebhook, verifyWebhookSignature } from '../../shared/provider-webhook';
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
      if (!expected || q['hub.mode'] !== 'subscribe' || typeof token !== 'string' || token !== expected) {
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
      if (!verifyWebhookSignature(secret, raw, Array.isArray(header) ? header[0] : header)) {
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
          await services.transport.publish(PROVIDER_WEBHOOK_TOPIC, records);
        } catch (err) {
          request.log.error({ err, records: records.length }, 'publishing provider notifications failed');
          throw new ApiError(503, 'notifications could not be accepted right now; retry later', 'UNAVAILABLE');
        }
      }
      return { received: records.length };
    });
  });
}
