import { bulkDecider, finalStatus, parseChunkStreamId, chunkStreamId, recipientStatusChanges } from '../../src/commands/bulk/decider';
import type { BulkLifecycleEvent } from '../../src/commands/bulk/decider';
import { checkRecipients, checkRecipientVariables, deduplicate, MAX_REPORTED_RECIPIENTS } from '../../src/commands/bulk/input';
import { Pacer } from '../../src/workers/bulk-dispatcher';
import { spec } from '../support/decider';

const BULK = '3f8e2a4c-1b6d-4e7f-9a0b-2c3d4e5f6a7b';
const AT = '2026-03-01T10:00:00.000Z';
const base = { bulkId: BULK, companyId: 7 };

const created: BulkLifecycleEvent = {
  type: 'BulkSendCreated',
  data: {
    bulkId: BULK, taskId: 't', companyId: 7, createdByUserId: 3, numberId: 1, phoneNumberId: '100', displayPhoneNumber: '+54 11', verifiedName: 'Shop',
    tier: 'TIER_50', templateId: 9, templateName: 'welcome', language: 'es', category: 'MARKETING', templateStatus: 'APPROVED',
    template: { variables: [], buttons: [] }, totalRecipients: 3, uniqueRecipients: 2, chunkCount: 1, createdAt: AT,
  },
};
const started: BulkLifecycleEvent = { type: 'BulkSendStarted', data: { ...base, dispatcherId: 'd1', at: AT } };
const paused: BulkLifecycleEvent = { type: 'BulkSendPaused', data: { ...base, reason: 'quota', quotaUsed: 50, quotaLimit: 50, resumeAt: null, at: AT } };
const cancelled: BulkLifecycleEvent = { type: 'BulkSendCancelled', data: { ...base, cancelledBy: 'key', at: AT } };
const finished: BulkLifecycleEvent = { type: 'BulkSendFinished', data: { ...base, status: 'PARTIAL', dispatchedCount: 1, rejectedCount: 1, at: AT } };

describe('bulk decider', () => {
  const d = spec(bulkDecider);

  it('creates once', () => {
    d.given([]).when({ type: 'CreateBulkSend', data: created.data as never }).then([created]);
    d.given([created]).when({ type: 'CreateBulkSend', data: created.data as never }).thenThrows('BULK_EXISTS');
  });

  it('starts a queued bulk once', () => {
    d.given([created]).when({ type: 'StartBulkSend', data: { bulkId: BULK, dispatcherId: 'd1', at: AT } }).then([started]);
    d.given([created, started]).when({ type: 'StartBulkSend', data: { bulkId: BULK, dispatcherId: 'd2', at: AT } }).then([]);
    d.given([]).when({ type: 'StartBulkSend', data: { bulkId: BULK, dispatcherId: 'd1', at: AT } }).thenThrows('BULK_NOT_FOUND');
  });

  it('pauses and resumes a processing bulk, idempotently', () => {
    const pause = { type: 'PauseBulkSend' as const, data: { bulkId: BULK, quotaUsed: 50, quotaLimit: 50, resumeAt: null, at: AT } };
    const resume = { type: 'ResumeBulkSend' as const, data: { bulkId: BULK, at: AT } };
    d.given([created, started]).when(pause).then([paused]);
    d.given([created, started, paused]).when(pause).then([]);
    d.given([created, started, paused]).when(resume).then([{ type: 'BulkSendResumed', data: { ...base, at: AT } }]);
    d.given([created, started]).when(resume).then([]);
    d.given([created]).when(pause).then([]);
  });

  it('cancels a queued or processing bulk; refuses a finished or cancelled one', () => {
    const cancel = { type: 'CancelBulkSend' as const, data: { bulkId: BULK, cancelledBy: 'key', at: AT } };
    d.given([created]).when(cancel).then([cancelled]);
    d.given([created, started, paused]).when(cancel).then([cancelled]);
    d.given([created, started, cancelled]).when(cancel).thenThrows('BULK_FINISHED');
    d.given([created, started, finished]).when(cancel).thenThrows('BULK_FINISHED');
  });

  it('finishes with the status the outcomes give, once, never after a cancel', () => {
    const finish = (dispatchedCount: number, rejectedCount: number) =>
      ({ type: 'FinishBulkSend' as const, data: { bulkId: BULK, dispatchedCount, rejectedCount, at: AT } });
    d.given([created, started]).when(finish(1, 1)).then([finished]);
    d.given([created, started, finished]).when(finish(1, 1)).then([]);
    d.given([created, started, cancelled]).when(finish(2, 0)).then([]);
    expect([finalStatus(2, 0), finalStatus(1, 1), finalStatus(0, 2)]).toEqual(['COMPLETED', 'PARTIAL', 'FAILED']);
  });

  it('names chunk streams', () => {
    expect(chunkStreamId(BULK, 12)).toBe(`bulkchunk-${BULK}-12`);
    expect(parseChunkStreamId(chunkStreamId(BULK, 12))).toEqual({ bulkId: BULK, chunk: 12 });
    expect(parseChunkStreamId(`send-${BULK}`)).toBeUndefined();
  });
});

describe('recipient delivery statuses', () => {
  it.each([
    ['sent', 'delivered', [{ status: 'delivered', implied: false }]],
    ['pending', 'delivered', [{ status: 'delivered', implied: false }]],
    ['sent', 'read', [{ status: 'delivered', implied: true }, { status: 'read', implied: false }]],
    ['delivered', 'read', [{ status: 'read', implied: false }]],
    ['delivered', 'delivered', []],
    ['read', 'delivered', []],
    ['read', 'failed', []],
    ['delivered', 'sent', []],
    ['sent', 'failed', [{ status: 'failed', implied: false }]],
    ['delivered', 'failed', [{ status: 'failed', implied: false }]],
    ['failed', 'read', []],
  ] as const)('%s + %s', (current, status, expected) => {
    expect(recipientStatusChanges(current, status)).toEqual(expected);
  });
});

describe('send-bulk recipients', () => {
  it('names every invalid recipient by index', () => {
    const r = checkRecipients([
      { phone: '+5491155550001' },
      { phone: '5491155550002' },
      'x',
      { variables: {} },
      { phone: 5491155550005 },
      { phone: '+5491155550006', variables: [], button_variables: 'x' },
    ]);
    expect(r).toEqual({
      ok: false,
      messages: [
        'recipients[1].phone: Enter the phone number in international format: a leading + and digits only, no spaces.',
        'recipients[2]: must be an object with a phone, e.g. {"phone": "+5491155551234", "variables": {}}.',
        'recipients[3].phone: This field is required.',
        'recipients[4].phone: Not a valid string.',
        'recipients[5].variables: must be a JSON object.',
        'recipients[5].button_variables: must be a JSON object.',
      ],
    });
  });

  it(`describes the first ${MAX_REPORTED_RECIPIENTS} invalid recipients and counts the rest`, () => {
    const r = checkRecipients(Array.from({ length: 100 }, () => ({ phone: 'bad' })));
    expect(r.ok).toBe(false);
    const messages = (r as { messages: string[] }).messages;
    expect(messages).toHaveLength(MAX_REPORTED_RECIPIENTS + 1);
    expect(messages[MAX_REPORTED_RECIPIENTS]).toBe(`80 more invalid recipients (only the first ${MAX_REPORTED_RECIPIENTS} are described).`);
  });

  it('checks variables against the template with the single-send rules', () => {
    const template = {
      variables: [{ name: 'name', type: 'TEXT' as const, position: 1, isRequired: true, component: 'BODY' as const }],
      buttons: [],
    };
    const ok = checkRecipients([{ phone: '+5491155550001', variables: { name: 'Ana' } }, { phone: '+5491155550002' }]);
    if (!ok.ok) throw new Error('unexpected');
    expect(checkRecipientVariables(template, ok.recipients)).toEqual(["recipients[1].variables: Variable 'name' is required."]);
  });

  it('removes repeated phones, keeping the first occurrence', () => {
    const d = deduplicate([
      { phone: '+1', variables: { a: 1 }, buttonVariables: {} },
      { phone: '+2', variables: {}, buttonVariables: {} },
      { phone: '+1', variables: { a: 2 }, buttonVariables: {} },
    ]);
    expect(d.total).toBe(3);
    expect(d.unique).toBe(2);
    expect(d.recipients.map((r) => [r.phone, r.variables])).toEqual([['+1', { a: 1 }], ['+2', {}]]);
  });
});

describe('pacer', () => {
  it('spaces start times by the tier spacing on a fake clock', async () => {
    let t = 1_000_000;
    const pacer = new Pacer(1200, () => t, async (ms) => { t += ms; });
    const starts: number[] = [];
    for (let i = 0; i < 5; i++) {
      await pacer.wait();
      starts.push(t);
      t += 7; // the send itself takes a little time
    }
    expect(starts.slice(1).map((s, i) => s - starts[i])).toEqual([1200, 1200, 1200, 1200]);
  });

  it('does not wait without spacing, and honours a backoff', async () => {
    let t = 0;
    const sleeps: number[] = [];
    const pacer = new Pacer(0, () => t, async (ms) => { sleeps.push(ms); t += ms; });
    await pacer.wait();
    await pacer.wait();
    expect(sleeps).toEqual([]);
    pacer.backoff(1000);
    await pacer.wait();
    expect(sleeps).toEqual([1000]);
  });
});
