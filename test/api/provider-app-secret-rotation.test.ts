import { PROVIDER_WEBHOOK_TOPIC, signWebhook, statusWebhook } from '../../src/shared/provider-webhook';
import type { IncomingRecord } from '../../src/ports/transport';
import { createTestApp } from '../support/services';

// A reset of the provider's app secret: with PROVIDER_APP_SECRET_PREVIOUS set, a notification signed with either
// secret is taken; any other signature is still refused, and without the setting the old secret is refused.

type T = Awaited<ReturnType<typeof createTestApp>>;

const NEW_SECRET = 'the-new-app-secret';
const OLD_SECRET = 'the-old-app-secret';

const body = (id: string) => JSON.stringify(statusWebhook([{
  phoneNumberId: '109876543210001', providerMessageId: id, status: 'delivered' as const, timestamp: '1772359205', recipientId: '5491155551234',
}]));

async function appWith(env: Record<string, string>): Promise<{ t: T; seen: IncomingRecord[] }> {
  const t = await createTestApp({ env });
  const seen: IncomingRecord[] = [];
  await t.services.transport.subscribe(PROVIDER_WEBHOOK_TOPIC, async (r) => { seen.push(r); }, { groupId: 'rotation-spy' });
  return { t, seen };
}

const post = (t: T, raw: string, secret: string) => t.app.inject({
  method: 'POST', url: '/webhooks/provider', payload: raw,
  headers: { 'content-type': 'application/json', 'x-hub-signature-256': signWebhook(secret, raw) },
});

describe('PROVIDER_APP_SECRET_PREVIOUS (a reset of the app secret)', () => {
  it('takes notifications signed with the new or the previous secret, refuses a third (401, nothing published)', async () => {
    const { t, seen } = await appWith({ PROVIDER_APP_SECRET: NEW_SECRET, PROVIDER_APP_SECRET_PREVIOUS: OLD_SECRET });
    try {
      expect((await post(t, body('wamid.NEW'), NEW_SECRET)).statusCode).toBe(200);
      expect((await post(t, body('wamid.OLD'), OLD_SECRET)).statusCode).toBe(200);
      const third = await post(t, body('wamid.THIRD'), 'another-secret');
      expect({ status: third.statusCode, body: third.json() }).toEqual({ status: 401, body: { error: 'invalid or missing X-Hub-Signature-256' } });
      expect(seen.map((r) => r.key).sort()).toEqual(['wamid.NEW', 'wamid.OLD']);
    } finally {
      await t.close();
    }
  });

  it('without it, the old secret is refused (401)', async () => {
    const { t, seen } = await appWith({ PROVIDER_APP_SECRET: NEW_SECRET });
    try {
      const old = await post(t, body('wamid.OLD'), OLD_SECRET);
      expect({ status: old.statusCode, body: old.json() }).toEqual({ status: 401, body: { error: 'invalid or missing X-Hub-Signature-256' } });
      expect(seen).toHaveLength(0);
    } finally {
      await t.close();
    }
  });
});
