import { useWebhookTestBed, type WebhookTestBed } from '../support/webhook-receiver';
import { SHOP } from '../support/sends';

// Time review (2026-11-28, docs/business.md "Time and time zones"): webhook recovery's `since` / `until` at the edges
// of what a client may write. Never a 5xx: the range's instants reach Postgres whatever their year or precision, and a
// form without a zone, a leap second or a basic-format offset is the route's 400.

describe('webhook recovery: since / until at the edges', () => {
  let t: WebhookTestBed['t'];
  let register: WebhookTestBed['register'];
  useWebhookTestBed((bed) => ({ t, register } = bed));

  const recover = (endpointId: string, body: unknown) =>
    t.app.inject({ method: 'POST', url: `/api/v1/webhook-endpoints/${endpointId}/recover/`, headers: { 'x-api-key': SHOP.key }, payload: body as object });

  it('accepts any year zod reads and any precision; refuses what has no zone', async () => {
    const ep = await register('/edges');
    for (const body of [
      { since: '0000-01-01T00:00:00Z' },
      { since: '0001-01-01T00:00:00Z', until: '9999-12-31T23:59:59.999-23:59' },
      { since: '2026-11-01T00:00:00.123456789+14:00', until: '2026-11-01T00:00:00.123456789-03:30' },
    ]) {
      const res = await recover(ep.id, body);
      expect([body, res.statusCode, res.json()]).toEqual([body, 202, { requeued: 0, has_more: false }]);
    }
    for (const since of ['2026-11-01T00:00:00', '2026-11-01', '2026-11-01T23:59:60Z', '2026-11-01T00:00:00+0530', '2026-11-01t00:00:00z', '+010000-01-01T00:00:00Z']) {
      const res = await recover(ep.id, { since });
      expect([since, res.statusCode]).toEqual([since, 400]);
      expect(res.json()).toEqual({ error: expect.stringContaining('since must be an ISO 8601 date-time with a time zone') });
    }
  });
});
