// Review 13 (2026-11-28), what the consumers' dead-letter lines hold (docs/reliability.md, "What is logged"):
//  - the chat-message consumer dead-lettered a record with an invalid `contactPhone` with the reason
//    `contactPhone: "<the phone>" is not a valid phone number`: the phone in the warn line (and the x-dlq-reason).
//    Now the reason says what is wrong without the value; the dead-letter record keeps the record as it came.
//  - the delivery consumer's warn line logged the record's key, which for an inbound message is the sender's phone.
//    Now it logs the kind and the provider's message id besides topic/partition/offset (none in-process).
// Real Postgres, the in-process transport, the process logger's options (src/observability/logging.ts).
import { Writable } from 'node:stream';
import { InProcessTransport } from '../../src/adapters/in-process/transport';
import { createProcessLogger } from '../../src/observability/logging';
import type { Services } from '../../src/services';
import { startConversationConsumer } from '../../src/workers/conversation-consumer';
import { startDeliveryConsumer } from '../../src/workers/delivery-consumer';
import { messageRecord, provisionCompany, settle } from '../support/conversation-fixtures';
import { waitUntil } from '../support/sends';
import { createTestContext, type TestContext } from '../support/services';
import { logRef } from '../../src/observability/logging';

const BAD_PHONE = '+49 151 1234 56789 999';
const SENDER = '5491155557799';

function capture() {
  const lines: any[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      done();
    },
  });
  return { lines, logger: createProcessLogger('info', stream) };
}

describe('review13: consumers dead-letter without a phone in the log', () => {
  let ctx: TestContext;
  let transport: InProcessTransport;
  beforeAll(async () => {
    transport = new InProcessTransport({ retryDelayMs: 1 });
    ctx = await createTestContext({ transport });
    await provisionCompany(ctx.services, { companyId: 611 });
    await settle(ctx.services);
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('chat messages: an invalid contactPhone is dead-lettered with a reason that does not quote it; the record keeps it', async () => {
    const out = capture();
    const services: Services = { ...ctx.services, logger: out.logger };
    const consumer = await startConversationConsumer(services);
    try {
      const record = messageRecord({ companyId: 611, id: 'r13-bad-phone', conversationId: 'r13-c', contactPhone: BAD_PHONE });
      await ctx.services.transport.publish('conversation.messages', [{ key: '611', value: record }]);
      const dead = await waitUntil(async () => transport.deadLetters.find((d) => (d.record.value as any)?.id === 'r13-bad-phone'), 10_000, 'the dead letter');
      expect(dead.reason).toBe('invalid record: contactPhone: is not a valid phone number (22 characters, 17 digits)');
      expect((dead.record.value as any).contactPhone).toBe(BAD_PHONE); // what an operator looks at
      const line = await waitUntil(async () => out.lines.find((l) => l.msg === 'chat message dead-lettered'), 10_000, 'the warn line');
      expect(line).toMatchObject({ level: 40, topic: 'conversation.messages', reason: dead.reason });
      const text = JSON.stringify(out.lines);
      expect(text).not.toContain(BAD_PHONE);
      expect(text).not.toContain('151123456789');
      expect(text).not.toContain('1234 56789');
    } finally {
      await consumer.stop();
    }
  });

  it('provider notifications: the dead-letter line names the record by kind and provider message id, not by the sender phone (its key)', async () => {
    const out = capture();
    const services: Services = { ...ctx.services, logger: out.logger };
    const consumer = await startDeliveryConsumer(services, { ownerWaitMs: 10, ownerGraceMs: 100 });
    try {
      const value = {
        kind: 'message', phoneNumberId: 'r13-unknown-number', displayPhoneNumber: '541100000099', contact: null, receivedAt: '2026-03-01T10:00:00.000Z',
        message: { from: SENDER, id: 'wamid.R13-IN-1', timestamp: '1772359200', type: 'text', text: { body: 'hello' } },
      };
      await ctx.services.transport.publish('provider.webhooks', [{ key: SENDER, value }]);
      const dead = await waitUntil(async () => transport.deadLetters.find((d) => d.record.key === SENDER), 10_000, 'the dead letter');
      expect(dead.reason).toBe('inbound message wamid.R13-IN-1: unknown phone_number_id r13-unknown-number');
      const line = await waitUntil(async () => out.lines.find((l) => l.msg === 'provider notification dead-lettered'), 10_000, 'the warn line');
      // the provider message id carries the sender's number (base64): the line names it by logRef (review 19, docs/privacy.md)
      expect(line).toMatchObject({
        level: 40, topic: 'provider.webhooks', kind: 'message', providerMessageId: logRef('wamid.R13-IN-1'),
        reason: dead.reason.replace('wamid.R13-IN-1', logRef('wamid.R13-IN-1')),
      });
      expect(line).not.toHaveProperty('key');
      expect(JSON.stringify(out.lines)).not.toContain(SENDER);
    } finally {
      await consumer.stop();
    }
  });
});
