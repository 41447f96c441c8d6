import { seedFixture } from '../../src/commands/provisioning/seed';
import { BULK_CO, bulkFixture } from '../support/bulk';
import { messageRecord, ndjson, recordMessages, settle } from '../support/conversation-fixtures';
import { createTestApp } from '../support/services';

// Review 22 (docs/privacy.md, "Export"): the chat-history message the service records for each template it sends had
// as text `[template order_update (es)] name=Eva`, and the export showed it so: the variables' values (a customer's
// name, amounts, links) in an export whose ids are anonymized. The spec fixes no such text (`content.text`: a string);
// the export shows `[template order_update (es)]`. Other messages' texts are exported as recorded.

type T = Awaited<ReturnType<typeof createTestApp>>;
const T0 = '2026-03-01T10:00:00.000Z';
const NUMBER = BULK_CO.unlimited.phoneNumberId;

describe('review 22: a sent template in the export has no variable values', () => {
  let t: T;
  let lines: any[];

  beforeAll(async () => {
    t = await createTestApp({ now: () => new Date(T0) });
    await seedFixture(t.services, bulkFixture(), { actor: 'test' });
    const send = async (phone: string, name: string, code: string) => {
      const r = await t.app.inject({
        method: 'POST', url: '/api/v1/platform-templates/send/', headers: { 'x-api-key': BULK_CO.key },
        payload: { phone_number_id: NUMBER, template_name: 'order_update', recipient_phone: phone, variables: { name }, button_variables: { button_0: code } },
      });
      expect(r.statusCode).toBe(200);
    };
    await send('+5491155550009', 'Eva Gómez', 'S-9081');
    await send('+5491155550010', 'Ana )] Ruiz, total=1.234,56 "€"', 'S-7\\77'); // a value holding the header's end, quotes, a backslash
    // a message of the platform (not the service's own template text) that looks like one: exported as recorded
    await recordMessages(t.services, [messageRecord({
      companyId: BULK_CO.companyId, id: 'inbound-1', occurredAt: T0, contactPhone: '+5491155550011',
      content: { type: 'text', text: '[template order_update (es)] name=Luz', mediaUrl: null, mediaMime: null },
    })]);
    await settle(t.services);
    const res = await t.app.inject({
      method: 'GET', url: '/api/v1/qualitative-export/messages', headers: { 'x-api-key': BULK_CO.key },
      query: { company_id: String(BULK_CO.companyId), from: '2026-03-01T00:00:00Z', to: '2026-03-02T00:00:00Z' },
    });
    expect(res.statusCode).toBe(200);
    lines = ndjson(res.body);
  }, 60_000);
  afterAll(() => t?.close());

  it("shows each sent template as `[template <name> (<language>)]`, and no value anywhere in the line", () => {
    const templates = lines.filter((l) => l.author.type === 'system');
    expect(templates.map((l) => l.content)).toEqual([
      { type: 'notification_template', text: '[template order_update (es)]', media_url: null, media_mime: null },
      { type: 'notification_template', text: '[template order_update (es)]', media_url: null, media_mime: null },
    ]);
    const exported = JSON.stringify(templates);
    for (const value of ['Eva', 'Gómez', 'S-9081', 'Ana', 'Ruiz', 'total', '1.234', '€', 'S-7']) expect(exported).not.toContain(value);
  });

  it("exports a contact's text as recorded, even one written like a template's", () => {
    const inbound = lines.filter((l) => l.author.type === 'contact');
    expect(inbound.map((l) => l.content.text)).toEqual(['[template order_update (es)] name=Luz']);
  });
});
