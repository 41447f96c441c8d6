import { seedFixture } from '../../src/commands/provisioning/seed';
import { COUNTRY_CODE_MESSAGE, SEND_PHONE_MESSAGE } from '../../src/shared/phone';
import { EXAMPLE, countEvents, exampleFixture } from '../support/provisioning';
import { createTestApp } from '../support/services';

// Regression review 19: a single send's recipient whose country calling code starts with 0 (23a7f01) was refused by
// the send handler, after the route's schema had passed the body: so with another field wrong too, the 400 named only
// that other field (or only the phone), where a recipient that breaks the format is reported beside the other
// fields' errors in one body. The route's schema now refuses it as it refuses any other bad phone, with its own
// message (docs/sends.md, "Order of checks": fields first). Over real HTTP (loopback).

type T = Awaited<ReturnType<typeof createTestApp>>;
const SEND = '/api/v1/platform-templates/send/';
const NUMBER_ID = '109876543210001';

describe('regression review 19: a recipient whose country code starts with 0 is a field error of the route', () => {
  let t: T;
  let base = '';

  beforeAll(async () => {
    t = await createTestApp();
    await seedFixture(t.services, exampleFixture(), { actor: 'test' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    await t?.close();
  });

  const post = async (body: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(base + SEND, {
      method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json', 'x-api-key': EXAMPLE.key, ...headers },
    });
    return { status: res.status, body: await res.json() };
  };
  const sendBody = (recipient: string) => ({
    phone_number_id: NUMBER_ID, template_name: 'appointment_reminder', recipient_phone: recipient,
    variables: { patient_name: 'Ana', appointment_at: '2026-03-10T10:00:00-03:00' }, button_variables: { button_0: 'abc' },
  });

  it.each([
    ['+54 9 11 5555 0001', SEND_PHONE_MESSAGE],
    ['+005491155550001', COUNTRY_CODE_MESSAGE],
    ['+05491155550001', COUNTRY_CODE_MESSAGE],
  ])('%s beside a missing template_name: both fields in one 400, nothing recorded', async (phone, message) => {
    const before = await countEvents(t.db.pool);
    const { template_name: _omitted, ...rest } = sendBody(phone);
    expect(await post(rest)).toEqual({ status: 400, body: { template_name: ['This field is required.'], recipient_phone: [message] } });
    expect(await post(rest, { 'idempotency-key': `rr19-${phone}` }))
      .toEqual({ status: 400, body: { template_name: ['This field is required.'], recipient_phone: [message] } });
    expect(await countEvents(t.db.pool)).toBe(before);
  });

  it('one message for each bad phone: the format first, the country code only of a phone in format', async () => {
    expect(await post(sendBody('+0'))).toEqual({ status: 400, body: { recipient_phone: [SEND_PHONE_MESSAGE] } });
    expect(await post(sendBody('+0123456789012345'))).toEqual({ status: 400, body: { recipient_phone: [SEND_PHONE_MESSAGE] } });
    expect(await post(sendBody('+0123456'))).toEqual({ status: 400, body: { recipient_phone: [COUNTRY_CODE_MESSAGE] } });
    expect(await post(sendBody(' +0123456 '))).toEqual({ status: 400, body: { recipient_phone: [COUNTRY_CODE_MESSAGE] } });
  });
});
