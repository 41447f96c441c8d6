import { seedFixture } from '../../src/commands/provisioning/seed';
import { UNLIMITED_DAILY_LIMIT } from '../../src/projections/accounts/queries';
import { BulkDispatcher } from '../../src/workers/bulk-dispatcher';
import { BULK_CO, BULK_OTHER, bulkFixture, phones, waitForBulk } from '../support/bulk';
import { createTestApp } from '../support/services';

// The bulk-send endpoints (sandbox provider, delivery off, real Postgres). The clock is set by the test, so
// every timestamp in the bodies is known; the dispatcher runs only when a test starts it.

type T = Awaited<ReturnType<typeof createTestApp>>;
const BASE = '/api/v1/platform-templates';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const T0 = '2026-03-01T10:00:00.000Z';

describe('bulk sends API', () => {
  let t: T;
  let current = new Date(T0);
  let dispatcher: BulkDispatcher | undefined;

  beforeAll(async () => {
    t = await createTestApp({ now: () => current });
    await seedFixture(t.services, bulkFixture(), { actor: 'test' });
  });
  afterEach(async () => {
    await dispatcher?.stop();
    dispatcher = undefined;
  });
  afterAll(async () => {
    await t?.close();
  });

  const startDispatcher = () => {
    dispatcher = new BulkDispatcher(t.services, { pollMs: 20, sleep: async () => undefined });
    dispatcher.start();
  };
  const post = (payload: unknown, key: string | null = BULK_CO.key) =>
    t.app.inject({ method: 'POST', url: `${BASE}/send-bulk/`, headers: key ? { 'x-api-key': key } : {}, payload: payload as object });
  const get = (url: string, key: string = BULK_CO.key) => t.app.inject({ method: 'GET', url, headers: { 'x-api-key': key } });
  const cancel = (id: string, key: string = BULK_CO.key) =>
    t.app.inject({ method: 'POST', url: `${BASE}/bulk-sends/${id}/cancel/`, headers: { 'x-api-key': key } });
  const welcome = (recipients: unknown[], over: Record<string, unknown> = {}) => ({
    phone_number_id: BULK_CO.unlimited.phoneNumberId, template_name: 'welcome', recipients, ...over,
  });
  const finished = (b: { status: string }) => ['COMPLETED', 'PARTIAL', 'FAILED', 'CANCELLED'].includes(b.status);

  describe('POST send-bulk/: validation', () => {
    it('401 without a key', async () => {
      const res = await post(welcome([{ phone: '+5491155550001' }]), null);
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ error: 'API key required: send it in the X-API-Key header' });
    });

    it('names every missing required field', async () => {
      const res = await post({});
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({
        phone_number_id: ['This field is required.'],
        template_name: ['This field is required.'],
        recipients: ['This field is required.'],
      });
    });

    it('refuses empty or non-list recipients', async () => {
      expect((await post(welcome([]))).json()).toEqual({ recipients: ['This list may not be empty.'] });
      const res = await post(welcome('x' as never));
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ recipients: ['Expected a list of recipients.'] });
    });

    it('names the recipient with a bad phone: nothing is created', async () => {
      const before = (await t.db.pool.query('SELECT count(*)::int AS n FROM es.events')).rows[0].n;
      const res = await post(welcome([{ phone: '+5491155550001' }, { phone: '+5491155550002' }, { phone: '+5491155550003' }, { phone: '+54 9 11 5555-0004' }]));
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({
        recipients: ['recipients[3].phone: Enter the phone number in international format: a leading + and digits only, no spaces.'],
      });
      expect((await t.db.pool.query('SELECT count(*)::int AS n FROM es.events')).rows[0].n).toBe(before);
    });

    it('checks every recipient\'s variables against the template', async () => {
      const res = await post({
        phone_number_id: BULK_CO.unlimited.phoneNumberId,
        template_name: 'order_update',
        recipients: [
          { phone: '+5491155550001', variables: { name: 'Ana' }, button_variables: { button_0: 'A-1' } },
          { phone: '+5491155550002', variables: {} },
          { phone: '+5491155550003', variables: { name: 'Luz', nope: 1 }, button_variables: { button_0: 'A-3' } },
        ],
      });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({
        recipients: [
          "recipients[1].variables: Variable 'name' is required.",
          "recipients[1].button_variables: 'button_0' is required: button 0 is a URL button with a dynamic suffix.",
          "recipients[2].variables: Unknown variable 'nope': the template has no such variable.",
        ],
      });
    });

    it('404 for an unknown number or template, 400 for a template that is not approved', async () => {
      const noNumber = await post(welcome([{ phone: '+5491155550001' }], { phone_number_id: '999' }));
      expect(noNumber.statusCode).toBe(404);
      expect(noNumber.json()).toEqual({ error: "Phone number '999' not found for this business account." });
      const other = await post(welcome([{ phone: '+5491155550001' }], { phone_number_id: BULK_OTHER.number.phoneNumberId }));
      expect(other.statusCode).toBe(404);
      const noTemplate = await post(welcome([{ phone: '+5491155550001' }], { template_name: 'welcome', language: 'en' }));
      expect(noTemplate.statusCode).toBe(404);
      expect(noTemplate.json()).toEqual({ error: "Template 'welcome' (language 'en') not found for this business account." });
      const paused = await post(welcome([{ phone: '+5491155550001' }], { template_name: 'promo' }));
      expect(paused.statusCode).toBe(400);
      expect(paused.json()).toEqual({ error: "Template 'promo' (language 'es') is not approved (status PAUSED)." });
    });
  });

  describe('create, dispatch, read', () => {
    let bulkId: string;
    const list = phones(3, '+54911700');

    it('202 with the spec body; repeated phones removed', async () => {
      current = new Date(T0);
      const res = await post(welcome([...list, list[2], list[0]].map((phone) => ({ phone }))));
      expect(res.statusCode).toBe(202);
      const body = res.json();
      bulkId = body.bulk_send_id;
      expect(body).toEqual({
        bulk_send_id: expect.stringMatching(UUID),
        task_id: expect.stringMatching(UUID),
        status: 'queued',
        template_name: 'welcome',
        total_recipients: 5,
        unique_recipients: 3,
        estimated_time_minutes: 0,
        created_at: T0,
        whatsapp_phone_number: {
          id: BULK_CO.unlimited.id, phone_number_id: BULK_CO.unlimited.phoneNumberId, display_phone_number: '+54 11 4000-0051',
          verified_name: 'Bulk Shop', quality_rating: 'GREEN', messaging_limit_tier: 'TIER_UNLIMITED',
        },
        quota_info: {
          can_send: true, quota_needed: 3, quota_available: UNLIMITED_DAILY_LIMIT, quota_total: UNLIMITED_DAILY_LIMIT, tier: 'TIER_UNLIMITED',
        },
      });
      expect(body.task_id).not.toBe(bulkId);
    });

    it('the detail shows it queued at once (read-your-writes)', async () => {
      const res = await get(`${BASE}/bulk-sends/${bulkId}/`);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({
        id: bulkId,
        status: 'QUEUED',
        template: { id: 5101, template_name: 'welcome', language: 'es', status: 'APPROVED' },
        phone_number: { id: BULK_CO.unlimited.id, display_phone_number: '+54 11 4000-0051', verified_name: 'Bulk Shop' },
        total_recipients: 3,
        sent_count: 0, delivered_count: 0, read_count: 0, failed_count: 0, pending_count: 3,
        progress_percentage: 0,
        estimated_time_minutes: 0,
        started_at: null,
        completed_at: null,
        created_at: T0,
        created_by: BULK_CO.user,
      });
      expect((await get(`${BASE}/bulk-sends/${bulkId}/messages/`)).json()).toEqual({ count: 0, next: null, previous: null, results: [] });
    });

    it('after dispatch: counters, progress, times, messages', async () => {
      current = new Date('2026-03-01T10:05:00.000Z');
      startDispatcher();
      await waitForBulk(t.db.pool, BULK_CO.companyId, bulkId, finished);
      const detail = (await get(`${BASE}/bulk-sends/${bulkId}/`)).json();
      expect(detail).toMatchObject({
        status: 'COMPLETED', sent_count: 3, pending_count: 0, failed_count: 0, progress_percentage: 100, estimated_time_minutes: 0,
        started_at: '2026-03-01T10:05:00.000Z', completed_at: '2026-03-01T10:05:00.000Z',
      });
      const messages = await get(`${BASE}/bulk-sends/${bulkId}/messages/?page_size=2`);
      expect(messages.statusCode).toBe(200);
      const page1 = messages.json();
      expect(page1).toEqual({
        count: 3,
        next: `http://localhost:80${BASE}/bulk-sends/${bulkId}/messages/?page_size=2&page=2`,
        previous: null,
        results: [0, 1].map((i) => ({
          id: expect.any(Number), recipient_phone: list[i], status: 'sent', meta_message_id: expect.stringMatching(/^wamid\./),
          variables_used: {}, sent_at: '2026-03-01T10:05:00.000Z', delivered_at: null, read_at: null, error_message: null,
        })),
      });
      const page2 = (await get(page1.next.replace('http://localhost:80', ''))).json();
      expect(page2).toMatchObject({ count: 3, next: null, previous: `http://localhost:80${BASE}/bulk-sends/${bulkId}/messages/?page_size=2` });
      expect(page2.results.map((m: { recipient_phone: string }) => m.recipient_phone)).toEqual([list[2]]);
      expect((await get(`${BASE}/bulk-sends/${bulkId}/messages/?status=failed`)).json()).toEqual({ count: 0, next: null, previous: null, results: [] });
      expect((await get(`${BASE}/bulk-sends/${bulkId}/messages/?status=sent`)).json().count).toBe(3);
    });

    it('a failed recipient shows its error in messages', async () => {
      current = new Date('2026-03-01T11:00:00.000Z');
      startDispatcher();
      const res = await post(welcome([{ phone: '+5491170090000', variables: {} }, { phone: '+5491170090001' }]));
      const id = res.json().bulk_send_id;
      await waitForBulk(t.db.pool, BULK_CO.companyId, id, finished);
      const failed = (await get(`${BASE}/bulk-sends/${id}/messages/?status=failed`)).json();
      expect(failed).toEqual({
        count: 1, next: null, previous: null,
        results: [{
          id: expect.any(Number), recipient_phone: '+5491170090000', status: 'failed', meta_message_id: null, variables_used: {},
          sent_at: '2026-03-01T11:00:00.000Z', delivered_at: null, read_at: null, error_message: 'Message undeliverable',
        }],
      });
      expect((await get(`${BASE}/bulk-sends/${id}/`)).json()).toMatchObject({ status: 'PARTIAL', sent_count: 1, failed_count: 1, progress_percentage: 100 });
    });

    it('a paced tier estimates its time', async () => {
      const res = await post({ phone_number_id: BULK_CO.pacing.phoneNumberId, template_name: 'welcome', recipients: phones(3, '+54911710').map((phone) => ({ phone })) });
      expect(res.statusCode).toBe(202);
      expect(res.json()).toMatchObject({
        estimated_time_minutes: 0.06,
        quota_info: { can_send: true, quota_needed: 3, quota_available: 50, quota_total: 50, tier: 'TIER_50' },
      });
      const detail = (await get(`${BASE}/bulk-sends/${res.json().bulk_send_id}/`)).json();
      expect(detail).toMatchObject({ status: 'QUEUED', estimated_time_minutes: 0.06 });
      expect((await cancel(res.json().bulk_send_id)).statusCode).toBe(200);
    });
  });

  describe('list, cancel, errors', () => {
    const ids: string[] = [];
    const otherPost = (recipients: string[], at: string) => {
      current = new Date(at);
      return post({ phone_number_id: BULK_OTHER.number.phoneNumberId, template_name: 'welcome', recipients: recipients.map((phone) => ({ phone })) }, BULK_OTHER.key);
    };

    beforeAll(async () => {
      ids.push((await otherPost(phones(2, '+54911720'), '2026-03-02T09:00:00.000Z')).json().bulk_send_id);
      ids.push((await otherPost(phones(2, '+54911730'), '2026-03-03T09:00:00.000Z')).json().bulk_send_id);
      ids.push((await otherPost(phones(2, '+54911740'), '2026-03-04T09:00:00.000Z')).json().bulk_send_id);
    });

    it('cancels a queued bulk send (200, CANCELLED), then refuses again with 409', async () => {
      current = new Date('2026-03-04T10:00:00.000Z');
      const res = await cancel(ids[2], BULK_OTHER.key);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({
        id: ids[2], status: 'CANCELLED', pending_count: 2, sent_count: 0, progress_percentage: 0, estimated_time_minutes: 0,
        started_at: null, completed_at: '2026-03-04T10:00:00.000Z',
        created_by: { id: 82, email: 'ops82@other.example', first_name: 'Otto', last_name: 'Ruiz' },
      });
      const again = await cancel(ids[2], BULK_OTHER.key);
      expect(again.statusCode).toBe(409);
      expect(again.json()).toEqual({ error: `Bulk send ${ids[2]} is already CANCELLED and cannot be cancelled.` });
    });

    it('lists newest first with filters; paging links keep the filters', async () => {
      current = new Date('2026-03-05T09:00:00.000Z');
      startDispatcher();
      await waitForBulk(t.db.pool, BULK_OTHER.companyId, ids[0], finished);
      await waitForBulk(t.db.pool, BULK_OTHER.companyId, ids[1], finished);
      const all = await get(`${BASE}/bulk-sends/`, BULK_OTHER.key);
      expect(all.statusCode).toBe(200);
      expect(all.json()).toEqual({
        count: 3, next: null, previous: null,
        results: [ids[2], ids[1], ids[0]].map((id, i) => ({
          id,
          status: i === 0 ? 'CANCELLED' : 'COMPLETED',
          template: { id: 5401, template_name: 'welcome', language: 'es', status: 'APPROVED' },
          phone_number: { id: BULK_OTHER.number.id, display_phone_number: '+54 11 4000-0054', verified_name: 'Bulk Shop' },
          total_recipients: 2,
          sent_count: i === 0 ? 0 : 2, delivered_count: 0, read_count: 0, failed_count: 0, pending_count: i === 0 ? 2 : 0,
          progress_percentage: i === 0 ? 0 : 100,
          created_at: `2026-03-0${4 - i}T09:00:00.000Z`,
          completed_at: i === 0 ? '2026-03-04T10:00:00.000Z' : '2026-03-05T09:00:00.000Z',
        })),
      });
      const q = `${BASE}/bulk-sends/?status=COMPLETED&template=5401&created_after=2026-03-02&created_before=2026-03-03&page_size=1`;
      const p1 = (await get(q, BULK_OTHER.key)).json();
      expect(p1).toMatchObject({ count: 2, next: `http://localhost:80${q}&page=2`, previous: null });
      expect(p1.results.map((b: { id: string }) => b.id)).toEqual([ids[1]]);
      const p2 = (await get(`${q}&page=2`, BULK_OTHER.key)).json();
      expect(p2).toMatchObject({ count: 2, next: null, previous: `http://localhost:80${q}` });
      expect(p2.results.map((b: { id: string }) => b.id)).toEqual([ids[0]]);
      expect((await get(`${BASE}/bulk-sends/?created_before=2026-03-02`, BULK_OTHER.key)).json().count).toBe(1);
      expect((await get(`${BASE}/bulk-sends/?template=1`, BULK_OTHER.key)).json().count).toBe(0);
      expect((await get(`${BASE}/bulk-sends/?page_size=1000`, BULK_OTHER.key)).json().results).toHaveLength(3);
      // another company sees none of these
      const mine = (await get(`${BASE}/bulk-sends/?page_size=100`)).json();
      expect(mine.results.some((b: { id: string }) => ids.includes(b.id))).toBe(false);
    });

    it('400 for bad filters, 404 {detail} past the last page', async () => {
      const res = await get(`${BASE}/bulk-sends/?status=DONE&template=x&created_after=2026-13-01&page=0`, BULK_OTHER.key);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({
        status: ['Select a valid choice. DONE is not one of the available choices.'],
        template: ['A valid integer is required.'],
        created_after: ['Enter a valid date in YYYY-MM-DD format.'],
        page: ['Ensure this value is greater than or equal to 1.'],
      });
      const bad = await get(`${BASE}/bulk-sends/${ids[0]}/messages/?status=queued`, BULK_OTHER.key);
      expect(bad.statusCode).toBe(400);
      expect(bad.json()).toEqual({ status: ['Select a valid choice. queued is not one of the available choices.'] });
      const past = await get(`${BASE}/bulk-sends/?page=9`, BULK_OTHER.key);
      expect(past.statusCode).toBe(404);
      expect(past.json()).toEqual({ detail: 'Invalid page.' });
    });

    it('404 {detail} for an unknown or another company\'s bulk send; 400 for a malformed id', async () => {
      const unknown = '00000000-0000-4000-8000-000000000000';
      for (const url of [`${BASE}/bulk-sends/${unknown}/`, `${BASE}/bulk-sends/${unknown}/messages/`, `${BASE}/bulk-sends/${ids[0]}/`, `${BASE}/bulk-sends/${ids[0]}/messages/`]) {
        const res = await get(url);
        expect(res.statusCode).toBe(404);
        expect(res.json()).toEqual({ detail: 'Bulk send not found.' });
      }
      const cancelled = await cancel(unknown);
      expect(cancelled.statusCode).toBe(404);
      expect(cancelled.json()).toEqual({ detail: 'Bulk send not found.' });
      const malformed = await get(`${BASE}/bulk-sends/not-a-uuid/`);
      expect(malformed.statusCode).toBe(400);
      expect(malformed.json()).toEqual({ bulk_send_id: ['Must be a valid UUID.'] });
    });

    it('409 when cancelling a finished bulk send', async () => {
      const res = await cancel(ids[0], BULK_OTHER.key);
      expect(res.statusCode).toBe(409);
      expect(res.json()).toEqual({ error: `Bulk send ${ids[0]} is already COMPLETED and cannot be cancelled.` });
    });

    it('documents the endpoints, cancel included, in the OpenAPI document', async () => {
      const doc = (await t.app.inject({ method: 'GET', url: '/docs/json' })).json();
      const cancelOp = doc.paths[`${BASE}/bulk-sends/{bulk_send_id}/cancel/`].post;
      expect(cancelOp.summary).toBe('Cancel a bulk send');
      expect(cancelOp.description).toMatch(/Stops further sends/);
      expect(doc.paths[`${BASE}/send-bulk/`].post.description).toMatch(/32 MiB/);
      expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining([`${BASE}/bulk-sends/`, `${BASE}/bulk-sends/{bulk_send_id}/messages/`]));
    });
  });
});
