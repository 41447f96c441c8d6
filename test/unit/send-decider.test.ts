import { sendDecider, type SendCommand } from '../../src/commands/send/decider';
import type { SendEvent } from '../../src/events/sends';
import { spec } from '../support/decider';

const sendId = '6f1c2a8e-1b7d-4a57-9a3e-0a0b0c0d0e0f';
const pid = 'wamid.ABC';
const request = {
  sendId, companyId: 101, numberId: 21, phoneNumberId: '109876543210001', templateId: 901,
  templateName: 'appointment_reminder', language: 'es', category: 'UTILITY',
  recipientPhone: '+5491155551234', recipientE164: '+5491155551234',
  variables: { patient_name: 'Juan' }, buttonVariables: {}, requestedAt: '2026-03-01T10:00:00.000Z',
};
const requested: SendEvent = { type: 'TemplateSendRequested', data: request };
const accepted: SendEvent = {
  type: 'TemplateSendAccepted',
  data: { sendId, companyId: 101, numberId: 21, recipientE164: '+5491155551234', providerMessageId: pid, acceptedAt: '2026-03-01T10:00:01.000Z' },
};
const status = (s: 'delivered' | 'read' | 'failed', at: string, extra: Partial<{ errorCode: string; errorMessage: string; implied: boolean }> = {}): SendEvent => ({
  type: 'DeliveryStatusRecorded',
  data: { sendId, companyId: 101, providerMessageId: pid, status: s, at, errorCode: extra.errorCode ?? null, errorMessage: extra.errorMessage ?? null, implied: extra.implied ?? false },
});
const record = (s: 'sent' | 'delivered' | 'read' | 'failed', at: string, err: { code?: string; message?: string } = {}): SendCommand => ({
  type: 'RecordDeliveryStatus',
  data: { sendId, providerMessageId: pid, status: s, at, errorCode: err.code ?? null, errorMessage: err.message ?? null },
});
const T1 = '2026-03-01T10:00:05.000Z';
const T2 = '2026-03-01T10:01:00.000Z';

describe('send decider', () => {
  describe('request and provider answer', () => {
    it('records a request on a new stream', () => {
      spec(sendDecider).given([]).when({ type: 'RequestTemplateSend', data: request }).then([requested]);
    });
    it('refuses a second request on the same stream', () => {
      spec(sendDecider).given([requested]).when({ type: 'RequestTemplateSend', data: request }).thenThrows('SEND_EXISTS');
    });
    it('records the acceptance with the provider id and what the quota needs', () => {
      spec(sendDecider).given([requested])
        .when({ type: 'RecordSendAccepted', data: { sendId, providerMessageId: pid, at: '2026-03-01T10:00:01.000Z' } })
        .then([accepted]);
    });
    it('an acceptance repeated with the same provider id decides nothing', () => {
      spec(sendDecider).given([requested, accepted])
        .when({ type: 'RecordSendAccepted', data: { sendId, providerMessageId: pid, at: T1 } })
        .then([]);
    });
    it('refuses an acceptance with another provider id after acceptance', () => {
      spec(sendDecider).given([requested, accepted])
        .when({ type: 'RecordSendAccepted', data: { sendId, providerMessageId: 'wamid.OTHER', at: T1 } })
        .thenThrows('SEND_NOT_PENDING');
    });
    it('refuses an acceptance of a send never requested', () => {
      spec(sendDecider).given([])
        .when({ type: 'RecordSendAccepted', data: { sendId, providerMessageId: pid, at: T1 } })
        .thenThrows('SEND_NOT_PENDING');
    });
    it('records a rejection with code, message and retryability', () => {
      spec(sendDecider).given([requested])
        .when({ type: 'RecordSendRejected', data: { sendId, code: '131026', message: 'Message undeliverable', retryable: false, at: T1 } })
        .then([{ type: 'TemplateSendRejected', data: { sendId, companyId: 101, code: '131026', message: 'Message undeliverable', retryable: false, rejectedAt: T1 } }]);
    });
    it('refuses a rejection after acceptance', () => {
      spec(sendDecider).given([requested, accepted])
        .when({ type: 'RecordSendRejected', data: { sendId, code: '131026', message: 'x', retryable: false, at: T1 } })
        .thenThrows('SEND_NOT_PENDING');
    });
  });

  describe('delivery statuses (monotonic)', () => {
    it('sent → delivered', () => {
      spec(sendDecider).given([requested, accepted]).when(record('delivered', T1)).then([status('delivered', T1)]);
    });
    it('delivered → read', () => {
      spec(sendDecider).given([requested, accepted, status('delivered', T1)]).when(record('read', T2)).then([status('read', T2)]);
    });
    it('read without delivered implies delivered at the read time', () => {
      spec(sendDecider).given([requested, accepted]).when(record('read', T2))
        .then([status('delivered', T2, { implied: true }), status('read', T2)]);
    });
    it('a duplicate delivered is a no-op', () => {
      spec(sendDecider).given([requested, accepted, status('delivered', T1)]).when(record('delivered', T1)).then([]);
    });
    it('a late delivered after read is a no-op', () => {
      spec(sendDecider).given([requested, accepted, status('delivered', T2, { implied: true }), status('read', T2)])
        .when(record('delivered', T1)).then([]);
    });
    it('a late sent never downgrades', () => {
      spec(sendDecider).given([requested, accepted, status('delivered', T1)]).when(record('sent', T1)).then([]);
      spec(sendDecider).given([requested, accepted]).when(record('sent', T1)).then([]);
    });
    it('failed after sent records code and message', () => {
      spec(sendDecider).given([requested, accepted]).when(record('failed', T1, { code: '131047', message: 'Re-engagement message' }))
        .then([status('failed', T1, { errorCode: '131047', errorMessage: 'Re-engagement message' })]);
    });
    it('failed after delivered is recorded', () => {
      spec(sendDecider).given([requested, accepted, status('delivered', T1)]).when(record('failed', T2, { code: '131000' }))
        .then([status('failed', T2, { errorCode: '131000' })]);
    });
    it('nothing moves after failed or after read', () => {
      const failed = status('failed', T1, { errorCode: '131047' });
      spec(sendDecider).given([requested, accepted, failed]).when(record('delivered', T2)).then([]);
      spec(sendDecider).given([requested, accepted, failed]).when(record('failed', T2)).then([]);
      spec(sendDecider).given([requested, accepted, status('delivered', T1), status('read', T2)]).when(record('failed', T2)).then([]);
    });
    it('refuses a status for a send that was not accepted', () => {
      spec(sendDecider).given([requested]).when(record('delivered', T1)).thenThrows('SEND_NOT_ACCEPTED');
      spec(sendDecider).given([]).when(record('delivered', T1)).thenThrows('SEND_NOT_ACCEPTED');
    });
    it('refuses a status naming another provider id', () => {
      spec(sendDecider).given([requested, accepted])
        .when({ type: 'RecordDeliveryStatus', data: { sendId, providerMessageId: 'wamid.X', status: 'delivered', at: T1, errorCode: null, errorMessage: null } })
        .thenThrows('PROVIDER_ID_MISMATCH');
    });
  });
  describe('a request without an answer (keyed send whose process died)', () => {
    const resolve = (now: string): SendCommand => ({ type: 'ResolveUnansweredSend', data: { sendId, now, outcomeUnknownAfterMs: 600_000 } });
    it('refuses to decide while the outcome may still arrive', () => {
      spec(sendDecider).given([requested]).when(resolve('2026-03-01T10:09:59.999Z')).thenThrows('SEND_OUTCOME_UNKNOWN');
    });
    it('records the send interrupted, not retryable, once the bound passed', () => {
      spec(sendDecider).given([requested]).when(resolve('2026-03-01T10:10:00.000Z')).then([{
        type: 'TemplateSendRejected',
        // the outcome is unknown: it carries the request's number, recipient and time (the quota counts it as sent)
        data: {
          sendId, companyId: 101, code: 'interrupted', message: 'interrupted, outcome unknown', retryable: false, rejectedAt: '2026-03-01T10:10:00.000Z',
          numberId: 21, recipientE164: '+5491155551234', requestedAt: request.requestedAt,
        },
      }]);
    });
    it('decides nothing for a send that has its answer', () => {
      spec(sendDecider).given([requested, accepted]).when(resolve('2026-03-02T00:00:00.000Z')).then([]);
    });
    it('accepts a send reconciled from a status after the request', () => {
      spec(sendDecider).given([requested])
        .when({ type: 'RecordSendAccepted', data: { sendId, providerMessageId: pid, at: '2026-03-01T10:00:01.000Z' } })
        .then([accepted]);
    });
    it('refuses a reconciliation after the send was recorded interrupted', () => {
      spec(sendDecider).given([requested, { type: 'TemplateSendRejected', data: { sendId, companyId: 101, code: 'interrupted', message: 'interrupted, outcome unknown', retryable: false, rejectedAt: T2 } }])
        .when({ type: 'RecordSendAccepted', data: { sendId, providerMessageId: pid, at: T1 } })
        .thenThrows('SEND_NOT_PENDING');
    });
  });
});
