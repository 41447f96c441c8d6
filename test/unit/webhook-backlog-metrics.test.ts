import { createMetrics, exposeWebhookBacklog } from '../../src/shared/metrics';

// The backlog gauges read at scrape time (docs/webhooks.md, "Operating"): at most one database read a second,
// whatever the number of scrapes (/metrics needs no key), and a failed read does not fail the scrape.

const sample = (text: string, series: string): string | undefined =>
  text.split('\n').find((l) => l.startsWith(`${series} `))?.slice(series.length + 1);

describe('webhook backlog gauges', () => {
  it('show the read values; scrapes within a second share one read', async () => {
    const metrics = createMetrics();
    let reads = 0;
    exposeWebhookBacklog(metrics, async () => ({ due: 7 + reads++, oldestDueSeconds: 42.5 }));
    const first = await metrics.registry.metrics();
    const second = await metrics.registry.metrics();
    expect(reads).toBe(1);
    for (const text of [first, second]) {
      expect(sample(text, 'switchboard_webhook_deliveries_due')).toBe('7');
      expect(sample(text, 'switchboard_webhook_oldest_due_seconds')).toBe('42.5');
    }
  });

  it('a database that does not answer: both gauges NaN, the rest of the scrape goes on, the next scrape reads again', async () => {
    const metrics = createMetrics();
    metrics.eventsAppended.labels('Probe').inc();
    let reads = 0;
    exposeWebhookBacklog(metrics, async () => {
      reads++;
      throw new Error('connection refused');
    });
    const text = await metrics.registry.metrics();
    expect(sample(text, 'switchboard_webhook_deliveries_due')).toBe('Nan');
    expect(sample(text, 'switchboard_webhook_oldest_due_seconds')).toBe('Nan');
    expect(sample(text, 'switchboard_events_appended_total{type="Probe"}')).toBe('1');
    await metrics.registry.metrics();
    expect(reads).toBe(2);
  });
});
