import { createMetrics, exposeProjectionHealth, exposeWebhookBacklog } from '../../src/shared/metrics';

// The gauges read from the database at scrape time (docs/webhooks.md, "Operating"; docs/core.md, "Projections"): at
// most one read a second, whatever the number of scrapes (/metrics needs no key), and a failed read does not fail
// the scrape.

const sample = (text: string, series: string): string | undefined =>
  text.split('\n').find((l) => l.startsWith(`${series} `))?.slice(series.length + 1);

describe('webhook backlog gauges', () => {
  it('show the read values; scrapes within a second share one read', async () => {
    const metrics = createMetrics();
    let reads = 0;
    exposeWebhookBacklog(metrics, async () => ({ due: 7 + reads++, oldestDueSeconds: 42.5, fanOutLagSeconds: 3 }));
    const first = await metrics.registry.metrics();
    const second = await metrics.registry.metrics();
    expect(reads).toBe(1);
    for (const text of [first, second]) {
      expect(sample(text, 'switchboard_webhook_deliveries_due')).toBe('7');
      expect(sample(text, 'switchboard_webhook_oldest_due_seconds')).toBe('42.5');
      expect(sample(text, 'switchboard_webhook_fanout_lag_seconds')).toBe('3');
    }
  });

  it('a database that does not answer: the gauges NaN, the rest of the scrape goes on, the next scrape reads again', async () => {
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
    expect(sample(text, 'switchboard_webhook_fanout_lag_seconds')).toBe('Nan');
    expect(sample(text, 'switchboard_events_appended_total{type="Probe"}')).toBe('1');
    await metrics.registry.metrics();
    expect(reads).toBe(2);
  });
});

describe('projection gauges', () => {
  it('one sample per projection; a failed read leaves them out of that scrape and the rest of it alone', async () => {
    const metrics = createMetrics();
    metrics.eventsAppended.labels('Probe').inc();
    let up = true;
    exposeProjectionHealth(metrics, async () => {
      if (!up) throw new Error('connection refused');
      return [{ projection: 'sends', failing: true, lagSeconds: 120 }, { projection: 'contacts', failing: false, lagSeconds: 0 }];
    });
    const text = await metrics.registry.metrics();
    expect(sample(text, 'switchboard_projection_lag_seconds{projection="sends"}')).toBe('120');
    expect(sample(text, 'switchboard_projection_lag_seconds{projection="contacts"}')).toBe('0');
    expect(sample(text, 'switchboard_projection_failing{projection="sends"}')).toBe('1');
    expect(sample(text, 'switchboard_projection_failing{projection="contacts"}')).toBe('0');
    up = false;
    await new Promise((r) => setTimeout(r, 1_050)); // past the read shared by the scrapes of one second
    const failed = await metrics.registry.metrics();
    expect(failed).not.toContain('switchboard_projection_lag_seconds{');
    expect(failed).not.toContain('switchboard_projection_failing{');
    expect(sample(failed, 'switchboard_events_appended_total{type="Probe"}')).toBe('1');
  });
});
