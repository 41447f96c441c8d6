import { sendDecider, type SendCommand } from '../../src/commands/send/decider';
import { createEventRegistry } from '../../src/events/catalogue';
import { type SendEvent, sendOutcomeUnknown } from '../../src/events/sends';
import { OUTCOME_UNKNOWN_CODES } from '../../src/events/bulk';
import { spec } from '../support/decider';

// A single send's rejection whose outcome is unknown (the provider may have the message) carries its request's number,
// recipient and time, so that the accounts read model counts it in the quota as sent; a refusal carries none
// (docs/sends.md, "Quota gate").

const eventRegistry = createEventRegistry();
const sendId = '6f1c2a8e-1b7d-4a57-9a3e-0a0b0c0d0e0f';
const request = {
  sendId, companyId: 101, numberId: 21, phoneNumberId: '109876543210001', templateId: 901,
  templateName: 'appointment_reminder', language: 'es', category: 'UTILITY',
  recipientPhone: '+54 9 11 5555-1234', recipientE164: '+5491155551234',
  variables: {}, buttonVariables: {}, requestedAt: '2026-03-01T10:00:00.000Z',
};
const requested: SendEvent = { type: 'TemplateSendRequested', data: request };
const T1 = '2026-03-01T10:00:05.000Z';
const reject = (code: string, retryable: boolean): SendCommand => ({ type: 'RecordSendRejected', data: { sendId, code, message: 'm', retryable, at: T1 } });
const use = { numberId: 21, recipientE164: '+5491155551234', requestedAt: '2026-03-01T10:00:00.000Z' };

describe('send decider: rejections whose outcome is unknown carry the quota use', () => {
  it.each(['timeout', 'connection_lost', 'invalid_response', 'provider_error', 'internal_error'])('%s: number, recipient (E.164) and request time', (code) => {
    spec(sendDecider).given([requested]).when(reject(code, true)).then([{
      type: 'TemplateSendRejected',
      data: { sendId, companyId: 101, code, message: 'm', retryable: true, rejectedAt: T1, ...use },
    }]);
  });

  it.each(['131026', '131000', 'http_503', 'network_error', '130429'])('%s (a refusal: nothing sent): no quota use', (code) => {
    spec(sendDecider).given([requested]).when(reject(code, code !== '131026')).then([{
      type: 'TemplateSendRejected',
      data: { sendId, companyId: 101, code, message: 'm', retryable: code !== '131026', rejectedAt: T1 },
    }]);
  });

  it('interrupted (a keyed send unanswered past the bound): the quota use, from the request', () => {
    const now = '2026-03-01T15:00:00.000Z';
    spec(sendDecider).given([requested])
      .when({ type: 'ResolveUnansweredSend', data: { sendId, now, outcomeUnknownAfterMs: 600_000 } })
      .then([{
        type: 'TemplateSendRejected',
        data: { sendId, companyId: 101, code: 'interrupted', message: 'interrupted, outcome unknown', retryable: false, rejectedAt: now, ...use },
      }]);
  });

  it('the rule is the bulk one plus the unclassified failure', () => {
    for (const code of OUTCOME_UNKNOWN_CODES) expect(sendOutcomeUnknown(code)).toBe(true);
    expect(sendOutcomeUnknown('provider_error')).toBe(true);
    for (const code of ['131026', 'http_503', 'network_error', '130429']) expect(sendOutcomeUnknown(code)).toBe(false);
  });

  it('the event schema: an old rejection (without the fields) and a new one are both valid, unchanged on read', () => {
    const old = { sendId, companyId: 101, code: 'timeout', message: 'm', retryable: true, rejectedAt: T1 };
    expect(() => eventRegistry.validate('TemplateSendRejected', old)).not.toThrow();
    expect(() => eventRegistry.validate('TemplateSendRejected', { ...old, ...use })).not.toThrow();
    expect(() => eventRegistry.validate('TemplateSendRejected', { ...old, numberId: 0 })).toThrow();
    expect(eventRegistry.versionOf('TemplateSendRejected')).toBe(1);
  });
});
