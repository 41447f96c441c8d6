// Review 19 (2026-11-28), privacy of the export (docs/privacy.md, docs/export.md "Anonymization"): a customer known
// only by number (an inbound provider message: no platform contact id) is exported under ids keyed with
// ANONYMIZATION_SECRET, so a dictionary of phone numbers does not reverse them without it; the number appears in no
// field but the message's own text (the spec anonymizes ids, not content). A guard: it held before this review.
import { createHash, createHmac } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { anonymizeId } from '../../src/shared/anonymize';
import { signWebhook } from '../../src/shared/provider-webhook';
import { ndjson } from '../support/conversation-fixtures';
import { APP_SECRET, SHOP, sendsFixture, unix, waitUntil } from '../support/sends';
import { createTestApp, TEST_ANON_SECRET } from '../support/services';

const SENDER = '5491155550166';
const E164 = `+${SENDER}`;
const TEXT = 'hola, soy yo';

describe('review19: a customer known only by number, in the export', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let base: string;

  beforeAll(async () => {
    t = await createTestApp({ workers: true });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await t?.close();
  });

  it('author and conversation ids are HMACs under the secret: not a plain hash of the number, another secret gives others', async () => {
    const body = JSON.stringify({
      object: 'whatsapp_business_account',
      entry: [{ id: 'waba', changes: [{ field: 'messages', value: {
        messaging_product: 'whatsapp', metadata: { display_phone_number: '', phone_number_id: SHOP.number.phoneNumberId },
        contacts: [{ wa_id: SENDER, profile: { name: 'Zoe Inbound' } }],
        messages: [{ from: SENDER, id: 'wamid.review19-in-1', timestamp: unix('2026-01-01T10:00:00Z'), type: 'text', text: { body: TEXT } }],
      } }] }],
    });
    const posted = await fetch(`${base}/webhooks/provider`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-hub-signature-256': signWebhook(APP_SECRET, body) }, body });
    expect(posted.status).toBe(200);

    const url = `${base}/api/v1/qualitative-export/messages?company_id=${SHOP.companyId}&from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z&include=classifications,extractions,tool_calls,trace_id`;
    const lines = await waitUntil(async () => {
      const res = await fetch(url, { headers: { 'x-api-key': SHOP.key } });
      const got = ndjson(await res.text());
      return got.length === 1 ? got : undefined;
    }, 20_000, 'the exported message');
    const line = lines[0];
    const conversation = `msgapp-${SHOP.number.phoneNumberId}-${SENDER}`;
    expect(line.author).toEqual({ type: 'contact', id: anonymizeId(TEST_ANON_SECRET, SHOP.companyId, 'contact', E164), display_name: null });
    expect(line.conversation_id).toBe(anonymizeId(TEST_ANON_SECRET, SHOP.companyId, 'conversation', conversation));
    expect(line.message_id).toBe(anonymizeId(TEST_ANON_SECRET, SHOP.companyId, 'message', 'wamid.review19-in-1'));
    expect(line.content.text).toBe(TEXT);

    // what a dictionary of numbers could try without the secret: plain hashes, an HMAC keyed by the company id alone
    const hex = (h: string) => h.slice(0, 24);
    const guesses = [E164, SENDER, `contact:${E164}`].flatMap((x) => [
      hex(createHash('sha256').update(x).digest('hex')),
      hex(createHmac('sha256', '').update(x).digest('hex')),
      hex(createHmac('sha256', String(SHOP.companyId)).update(x).digest('hex')),
      hex(createHmac('sha256', createHmac('sha256', '').update(String(SHOP.companyId)).digest()).update(x).digest('hex')),
    ]);
    expect(guesses).not.toContain(line.author.id.slice(4));
    expect(anonymizeId('another-secret-0123456789abcdef', SHOP.companyId, 'contact', E164)).not.toBe(line.author.id);

    // the number and the name are in no field of the line: only the message's text is the customer's own words
    const { content: _content, ...rest } = line;
    for (const value of [SENDER, SENDER.slice(3), 'Zoe Inbound', 'wamid.review19-in-1']) expect(JSON.stringify(rest)).not.toContain(value);
  });
});
