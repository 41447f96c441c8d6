import { seedFixture } from '../../src/commands/provisioning/seed';
import { sendTemplate } from '../../src/commands/send/send-template';
import { createDeliveryHandler, createSendStatusApplier } from '../../src/workers/delivery-consumer';
import { START, type RecordedEvent } from '../../src/ports/event-store';
import { accountsProjection } from '../../src/projections/accounts/projection';
import { conversationsProjection } from '../../src/projections/conversations/projection';
import type { Projection } from '../../src/projections/projection';
import { checksumProjection } from '../../src/projections/rebuild';
import { sendsProjection } from '../../src/projections/sends/projection';
import { findProviderMessageOwner } from '../../src/projections/sends/queries';
import { chunksOf, fillProjection } from '../support/projections';
import { createTestContext } from '../support/services';
import { invoiceVariables, SHOP, sendsFixture } from '../support/sends';

// A projection's `applyBatch` must leave exactly the rows that `apply`, one event at a time, leaves: for the
// whole log in one batch, in batches of every size, and with a batch delivered twice (redelivery).

type Ctx = Awaited<ReturnType<typeof createTestContext>>;

describe('Projection.applyBatch equals apply one event at a time', () => {
  let t: Ctx;
  let log: RecordedEvent[];
  let clock = Date.parse('2026-03-01T10:00:00.000Z');

  beforeAll(async () => {
    t = await createTestContext({ now: () => new Date(clock) });
    await seedFixture(t.services, sendsFixture(), { actor: 'test' });
    const applyStatus = createSendStatusApplier();
    const handler = createDeliveryHandler(t.services, { ownerWaitMs: 2000 });
    const recipients = ['+5491155551234', '+5491155550001', '+5491155550002', '+5491155551234', '+5491155550003'];
    const sent: string[] = [];
    for (const [i, recipient] of recipients.entries()) {
      clock += 61_000; // different quota minutes, one recipient twice
      const out = await sendTemplate(t.services, {
        companyId: SHOP.companyId, actor: 'test', phoneNumberId: SHOP.number.phoneNumberId, templateName: 'invoice_ready', language: 'es',
        recipientPhone: recipient, variables: invoiceVariables, buttonVariables: { button_0: `F-${i}` },
      });
      sent.push(out.providerMessageId);
    }
    const ts = (s: number) => String(Math.floor(clock / 1000) + s);
    const status = async (id: string, s: 'delivered' | 'read' | 'failed', at: string) => {
      const owner = (await findProviderMessageOwner(t.services.pool, id))!;
      await applyStatus(t.services, owner, { providerMessageId: id, status: s, at: new Date(Number(at) * 1000).toISOString(), timestamp: at,
        errorCode: s === 'failed' ? '131047' : null, errorMessage: s === 'failed' ? 'Re-engagement message' : null });
    };
    await status(sent[0], 'delivered', ts(10));
    await status(sent[0], 'read', ts(20));
    await status(sent[1], 'read', ts(30)); // read first: implies delivered
    await status(sent[2], 'delivered', ts(40));
    await status(sent[2], 'failed', ts(50));
    await status(sent[3], 'failed', ts(60));
    for (const [i, from] of ['5491155551234', '5491155550001', '5491155551234'].entries()) {
      await handler({
        topic: 'provider.webhooks', partition: 0, offset: String(i), key: from, headers: {},
        value: { kind: 'message', phoneNumberId: SHOP.number.phoneNumberId,
          message: { id: `wamid.in.${i}`, from, timestamp: ts(100 + i), type: 'text', text: { body: `hola ${i}` } } },
      } as never);
    }
    await t.services.runner.catchUp();
    log = (await t.services.store.readAll(START, 100_000)).events;
  }, 60_000);
  afterAll(() => t?.close());

  const fill = (p: Projection, schema: string, batches: RecordedEvent[][]) => fillProjection(t.services.pool, p, schema, batches);
  const chunks = chunksOf;

  const batched = [sendsProjection, accountsProjection, conversationsProjection];

  it.each(batched.map((p) => [p.name, p] as const))('%s: every batch size and a redelivered batch give the rows of apply', async (_name, p) => {
    expect(p.applyBatch).toBeDefined();
    expect(log.filter((e) => p.handles.includes(e.type)).length).toBeGreaterThan(5);
    const oneByOne = { ...p, applyBatch: undefined };
    await fill(oneByOne, `${p.schema}__one`, chunks(log, 1));
    const expected = await checksumProjection(t.services.pool, p, `${p.schema}__one`);
    expect(await checksumProjection(t.services.pool, p)).toBe(expected); // the live read model, filled by the runner
    for (const size of [log.length, 2, 3, 7]) {
      const batches = chunks(log, size);
      batches.splice(Math.floor(batches.length / 2), 0, batches[Math.floor(batches.length / 3)]); // one batch again, later
      await fill(p, `${p.schema}__batch`, batches);
      expect(await checksumProjection(t.services.pool, p, `${p.schema}__batch`)).toBe(expected);
    }
  });
});
