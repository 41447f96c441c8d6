import fc from 'fast-check';
import { webhookEndpointDecider, type Command } from '../../src/commands/webhook-endpoint/decider';
import { secretBox } from '../../src/commands/webhook-endpoint/secrets';
import { MAX_RETRY_AFTER_MS, nextRetryDelay, RETRY_SCHEDULE_MS, retryAfterDelay, retryDelayAfterFailure } from '../../src/workers/webhook-schedule';
import type { WebhookEndpointEvent } from '../../src/events/webhooks';
import { spec } from '../support/decider';
import { signingSecrets } from '../../src/projections/webhooks/queries';

const endpointId = '0d7a3c52-6a35-4c0f-9a1e-5b8c2f1d9e01';
const now = new Date('2026-03-01T10:00:00.000Z');
const later = new Date('2026-03-02T09:30:00.000Z');
const created: WebhookEndpointEvent = {
  type: 'WebhookEndpointCreated',
  data: { endpointId, companyId: 101, url: 'https://hooks.example/in', eventTypes: ['message.delivered'], description: null, secret: 'sealed-1', createdAt: now.toISOString() },
};
const disabled = (reason: 'client' | 'gone' | 'failing'): WebhookEndpointEvent => ({ type: 'WebhookEndpointDisabled', data: { endpointId, companyId: 101, reason, at: later.toISOString() } });
const deleted: WebhookEndpointEvent = { type: 'WebhookEndpointDeleted', data: { endpointId, companyId: 101, at: later.toISOString() } };
const update = (change: Omit<Extract<Command, { type: 'UpdateEndpoint' }>, 'type' | 'now'>): Command => ({ type: 'UpdateEndpoint', ...change, now: later });

describe('webhook endpoint decider', () => {
  const s = spec(webhookEndpointDecider);

  it('creates an enabled endpoint with its sealed secret; a repeated create changes nothing', () => {
    const create: Command = { type: 'CreateEndpoint', endpointId, companyId: 101, url: 'https://hooks.example/in', eventTypes: ['message.delivered'], description: null, secret: 'sealed-1', now, endpointsOfCompany: 0, maxEndpoints: 100 };
    s.given([]).when(create).then([created]);
    s.given([created]).when(create).then([]);
  });

  it("refuses a new endpoint at the company's limit, but answers a repeated create at it (a keyed retry)", () => {
    const create: Command = { type: 'CreateEndpoint', endpointId, companyId: 101, url: 'https://hooks.example/in', eventTypes: ['message.delivered'], description: null, secret: 'sealed-1', now, endpointsOfCompany: 100, maxEndpoints: 100 };
    s.given([]).when(create).thenThrows('ENDPOINT_LIMIT');
    s.given([]).when({ ...create, endpointsOfCompany: 99 }).then([created]);
    s.given([created]).when(create).then([]);
  });

  it('records a change only of what differs, with the full new values', () => {
    s.given([created]).when(update({ url: 'https://hooks.example/in', eventTypes: ['message.delivered'] })).then([]);
    s.given([created]).when(update({ eventTypes: ['message.read', 'message.failed'], description: 'CRM' })).then([{
      type: 'WebhookEndpointChanged',
      data: { endpointId, companyId: 101, url: 'https://hooks.example/in', eventTypes: ['message.read', 'message.failed'], description: 'CRM' },
    }]);
  });

  it('disables and enables by the client, each only when it changes the state', () => {
    s.given([created]).when(update({ enabled: false })).then([disabled('client')]);
    s.given([created, disabled('client')]).when(update({ enabled: false })).then([]);
    s.given([created, disabled('gone')]).when(update({ enabled: true })).then([{ type: 'WebhookEndpointEnabled', data: { endpointId, companyId: 101, at: later.toISOString() } }]);
    s.given([created]).when(update({ enabled: true })).then([]);
  });

  it('is disabled by the system for a 410 or 5 days of failures, once', () => {
    s.given([created]).when({ type: 'DisableEndpoint', reason: 'gone', now: later }).then([disabled('gone')]);
    s.given([created, disabled('gone')]).when({ type: 'DisableEndpoint', reason: 'failing', now: later }).then([]);
    s.given([created, deleted]).when({ type: 'DisableEndpoint', reason: 'failing', now: later }).then([]);
  });

  it('rotates the secret keeping the previous one valid for 24 h', () => {
    s.given([created]).when({ type: 'RotateSecret', secret: 'sealed-2', now: later }).then([{
      type: 'WebhookEndpointSecretRotated',
      data: { endpointId, companyId: 101, secret: 'sealed-2', previousSecretValidUntil: '2026-03-03T09:30:00.000Z' },
    }]);
  });

  it('a rotation made for a count of rotations is refused once the endpoint has another (a keyed secret depends on it)', () => {
    const rotated: WebhookEndpointEvent = { type: 'WebhookEndpointSecretRotated', data: { endpointId, companyId: 101, secret: 'sealed-2', previousSecretValidUntil: later.toISOString() } };
    const third = (rotationsBefore: number): Command => ({ type: 'RotateSecret', secret: 'sealed-3', now: later, rotationsBefore });
    s.given([created, rotated]).when(third(0)).thenThrows('ROTATION_RACED');
    s.given([created, rotated, rotated]).when(third(1)).thenThrows('ROTATION_RACED');
    s.given([created, rotated]).when(third(1)).then([{
      type: 'WebhookEndpointSecretRotated',
      data: { endpointId, companyId: 101, secret: 'sealed-3', previousSecretValidUntil: '2026-03-03T09:30:00.000Z' },
    }]);
  });

  it('deletes; a deleted or unknown endpoint refuses every client command', () => {
    s.given([created]).when({ type: 'DeleteEndpoint', now: later }).then([deleted]);
    for (const given of [[], [created, deleted]]) {
      s.given(given).when({ type: 'DeleteEndpoint', now: later }).thenThrows('ENDPOINT_NOT_FOUND');
      s.given(given).when(update({ enabled: false })).thenThrows('ENDPOINT_NOT_FOUND');
      s.given(given).when({ type: 'RotateSecret', secret: 'x', now: later }).thenThrows('ENDPOINT_NOT_FOUND');
    }
  });
});

describe('webhook secrets and retry schedule', () => {
  it('seals a secret so that only the same server secret opens it', () => {
    const box = secretBox('pepper-a');
    const sealed = box.seal('whsec_c2VjcmV0');
    expect(sealed).not.toContain('whsec_');
    expect(box.open(sealed)).toBe('whsec_c2VjcmV0');
    expect(() => secretBox('pepper-b').open(sealed)).toThrow();
  });

  it('waits 5 s, 30 s, 2 min ... for about three days with ±20 % jitter, then stops', () => {
    const total = RETRY_SCHEDULE_MS.reduce((a, b) => a + b, 0);
    expect(total / 3_600_000).toBeCloseTo(71.7, 1);
    expect(nextRetryDelay(RETRY_SCHEDULE_MS, 1, () => 0)).toBe(4000);
    expect(nextRetryDelay(RETRY_SCHEDULE_MS, 1, () => 1)).toBe(6000);
    expect(nextRetryDelay(RETRY_SCHEDULE_MS, 2, () => 0.5)).toBe(30_000);
    expect(nextRetryDelay(RETRY_SCHEDULE_MS, RETRY_SCHEDULE_MS.length, () => 0.5)).toBe(12 * 3_600_000);
    expect(nextRetryDelay(RETRY_SCHEDULE_MS, RETRY_SCHEDULE_MS.length + 1)).toBeUndefined();
  });

  it("reads Retry-After as delay-seconds or an HTTP-date (RFC 9110), 0 at least and 1 h at most; anything else is ignored", () => {
    const now = new Date('2026-03-01T10:00:00.000Z');
    expect(retryAfterDelay('120', now)).toBe(120_000);
    expect(retryAfterDelay(' 0 ', now)).toBe(0);
    expect(retryAfterDelay('Sun, 01 Mar 2026 10:10:00 GMT', now)).toBe(600_000);
    expect(retryAfterDelay('Sun, 01 Mar 2026 09:00:00 GMT', now)).toBe(0);
    expect(retryAfterDelay('99999999', now)).toBe(MAX_RETRY_AFTER_MS);
    for (const junk of ['', 'soon', '-5', '1.5', '1e3', '0x10']) expect(retryAfterDelay(junk, now)).toBeUndefined();
  });

  it('reads any Retry-After a client may send without throwing: a wait from 0 to 1 h, or nothing; seconds and dates as written', () => {
    const now = new Date('2026-03-01T10:00:00.000Z');
    fc.assert(fc.property(fc.string({ unit: 'binary', maxLength: 60 }), (v) => {
      const ms = retryAfterDelay(v, now);
      expect(ms === undefined || (Number.isInteger(ms) && ms >= 0 && ms <= MAX_RETRY_AFTER_MS)).toBe(true);
    }), { numRuns: 2_000 });
    fc.assert(fc.property(fc.nat({ max: 1e12 }), (n) => {
      expect(retryAfterDelay(String(n), now)).toBe(Math.min(n * 1000, MAX_RETRY_AFTER_MS));
    }));
    fc.assert(fc.property(fc.integer({ min: -86_400, max: 86_400 }), (s) => {
      expect(retryAfterDelay(new Date(now.getTime() + s * 1000).toUTCString(), now)).toBe(Math.min(Math.max(0, s * 1000), MAX_RETRY_AFTER_MS));
    }));
  });

  it("waits the longer of the schedule's wait and the answer's Retry-After; never past the schedule's end", () => {
    const half = () => 0.5;
    expect(retryDelayAfterFailure(RETRY_SCHEDULE_MS, 1, undefined, half)).toBe(5_000);
    expect(retryDelayAfterFailure(RETRY_SCHEDULE_MS, 1, 60_000, half)).toBe(60_000);
    expect(retryDelayAfterFailure(RETRY_SCHEDULE_MS, 2, 1_000, half)).toBe(30_000);
    expect(retryDelayAfterFailure(RETRY_SCHEDULE_MS, 9, MAX_RETRY_AFTER_MS, half)).toBe(8 * 3_600_000);
    expect(retryDelayAfterFailure(RETRY_SCHEDULE_MS, RETRY_SCHEDULE_MS.length + 1, 60_000, half)).toBeUndefined();
  });
});

describe('the secrets that sign a webhook', () => {
  const at = new Date('2026-03-02T10:00:00.000Z');
  const base = {
    endpointId: 'e', companyId: 1, url: 'https://hooks.example/x', eventTypes: ['message.sent'], description: null, enabled: true,
    disabledReason: null, createdAt: at, updatedAt: at, createdPosition: '0',
  };
  it('the current one, then the rotated-out ones whose 24 h are not over at the send, newest first', () => {
    const ep = {
      ...base, secret: 's3', previousSecret: 's2', previousValidUntil: new Date('2026-03-03T09:00:00.000Z'),
      olderSecrets: [{ secret: 's1', validUntil: '2026-03-03T08:00:00.000Z' }, { secret: 's0', validUntil: '2026-03-02T10:00:00.000Z' }],
    };
    expect(signingSecrets(ep, at)).toEqual(['s3', 's2', 's1']); // s0's grace ends at the send: no longer
    expect(signingSecrets(ep, new Date('2026-03-03T08:30:00.000Z'))).toEqual(['s3', 's2']);
    expect(signingSecrets(ep, new Date('2026-03-03T09:00:00.000Z'))).toEqual(['s3']);
    expect(signingSecrets({ ...ep, previousSecret: null, previousValidUntil: null, olderSecrets: [] }, at)).toEqual(['s3']);
  });
});
