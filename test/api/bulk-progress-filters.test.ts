import { seedFixture } from '../../src/commands/provisioning/seed';
import { bulkDetail, bulkListItem } from '../../src/http/routes/bulk';
import { getBulkSend } from '../../src/projections/bulk/queries';
import { BulkDispatcher } from '../../src/workers/bulk-dispatcher';
import { BULK_CO, bulkFixture, phones, RecordingProvider, sandbox, waitForBulk } from '../support/bulk';
import { createTestApp } from '../support/services';

// The bulk list's template filter within a Postgres integer, and progress_percentage never 100 while a recipient
// is pending (2026-11-27, docs/bulk.md "Reads").

const BASE = '/api/v1/platform-templates';
const T0 = new Date('2026-03-01T10:00:00.000Z');

describe('bulk sends API: template filter bounds, progress while pending', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;

  beforeAll(async () => {
    t = await createTestApp({ now: () => T0 });
    await seedFixture(t.services, bulkFixture(), { actor: 'test' });
  });
  afterAll(async () => {
    await t?.close();
  });

  const get = (url: string) => t.app.inject({ method: 'GET', url, headers: { 'x-api-key': BULK_CO.key } });
  const post = (payload: unknown) => t.app.inject({ method: 'POST', url: `${BASE}/send-bulk/`, headers: { 'x-api-key': BULK_CO.key }, payload: payload as object });

  it('a template id beyond a Postgres integer is a 400 field error, not a 500', async () => {
    for (const id of ['2147483648', '3000000000', '9007199254740991', '99999999999999999999']) {
      const res = await get(`${BASE}/bulk-sends/?template=${id}`);
      expect({ id, status: res.statusCode, body: res.json() }).toEqual({
        id, status: 400, body: { template: ['Ensure this value is less than or equal to 2147483647.'] },
      });
    }
    const below = await get(`${BASE}/bulk-sends/?template=-1`);
    expect([below.statusCode, below.json()]).toEqual([400, { template: ['A valid integer is required.'] }]);
    const largest = await get(`${BASE}/bulk-sends/?template=2147483647`);
    expect([largest.statusCode, largest.json()]).toEqual([200, { count: 0, next: null, previous: null, results: [] }]);
  });

  it('progress_percentage is truncated, and 100 only once no recipient is pending', async () => {
    const list = phones(3, '+54911720');
    const created = await post({ phone_number_id: BULK_CO.unlimited.phoneNumberId, template_name: 'welcome', recipients: list.map((phone) => ({ phone })) });
    expect(created.statusCode).toBe(202);
    const bulkId: string = created.json().bulk_send_id;
    // the last recipient's send is held: 2 of 3 processed (66.666...)
    let releaseLast!: () => void;
    const lastHeld = new Promise<void>((resolve) => (releaseLast = resolve));
    const provider = new RecordingProvider(sandbox(), () => T0);
    provider.hold = (request) => (request.to === list[2] ? lastHeld : undefined);
    const dispatcher = new BulkDispatcher(t.services, { pollMs: 20, sleep: async () => undefined, unlimitedWindow: 1, provider });
    dispatcher.start();
    try {
      await waitForBulk(t.db.pool, BULK_CO.companyId, bulkId, (b) => b.pendingCount === 1);
      expect((await get(`${BASE}/bulk-sends/${bulkId}/`)).json()).toMatchObject({ status: 'PROCESSING', pending_count: 1, progress_percentage: 66.66 });
      const listed = (await get(`${BASE}/bulk-sends/`)).json().results.find((b: { id: string }) => b.id === bulkId);
      expect(listed).toMatchObject({ pending_count: 1, progress_percentage: 66.66 });

      // the same record at 100,000 recipients: 99,999 processed is 99.99, never 100 (it showed 100.00)
      const row = (await getBulkSend(t.db.pool, BULK_CO.companyId, bulkId))!;
      const large = { ...row, totalRecipients: 100_000, pendingCount: 1 };
      expect([bulkDetail(large).progress_percentage, bulkListItem(large).progress_percentage]).toEqual([99.99, 99.99]);
      expect(bulkListItem({ ...row, totalRecipients: 20_001, pendingCount: 1 }).progress_percentage).toBe(99.99);
      expect(bulkListItem({ ...row, totalRecipients: 50, pendingCount: 21 }).progress_percentage).toBe(58);

      releaseLast();
      await waitForBulk(t.db.pool, BULK_CO.companyId, bulkId, (b) => b.status === 'COMPLETED');
      expect((await get(`${BASE}/bulk-sends/${bulkId}/`)).json()).toMatchObject({ status: 'COMPLETED', pending_count: 0, progress_percentage: 100 });
    } finally {
      releaseLast();
      await dispatcher.stop();
    }
  });
});
