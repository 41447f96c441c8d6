import { buildComponents, type TemplateShape } from '../../src/commands/send/components';

const rich: TemplateShape = {
  variables: [
    { name: 'banner', type: 'IMAGE', position: 1, isRequired: true, component: 'HEADER' },
    { name: 'due', type: 'DATE_TIME', position: 3, isRequired: true, component: 'BODY' },
    { name: 'name', type: 'TEXT', position: 1, isRequired: true, component: 'BODY' },
    { name: 'amount', type: 'CURRENCY', position: 2, isRequired: true, component: 'BODY' },
    { name: 'note', type: 'TEXT', position: 4, isRequired: false, component: 'BODY' },
    { name: 'code', type: 'TEXT', position: 1, isRequired: true, component: 'BUTTON' },
  ],
  buttons: [
    { type: 'URL', text: 'Pay', url: 'https://pay.example/i/{{1}}' },
    { type: 'QUICK_REPLY', text: 'Stop' },
    { type: 'PHONE_NUMBER', text: 'Call', phoneNumber: '+541100000000' },
  ],
};

describe('buildComponents', () => {
  it('builds header, body ordered by position and buttons with typed parameters', () => {
    const r = buildComponents(
      rich,
      { banner: 'https://cdn.example/b.png', name: 'Ana', amount: { amount: 12.5, code: 'ARS' }, due: '2026-03-01T10:00:00-03:00' },
      { button_0: 'INV-9', button_1: 'STOP_PAYLOAD' },
    );
    expect(r).toEqual({
      ok: true,
      components: [
        { type: 'header', parameters: [{ type: 'image', image: { link: 'https://cdn.example/b.png' } }] },
        {
          type: 'body',
          parameters: [
            { type: 'text', text: 'Ana' },
            { type: 'currency', currency: { fallback_value: 'ARS 12.50', code: 'ARS', amount_1000: 12500 } },
            { type: 'date_time', date_time: { fallback_value: '2026-03-01T10:00:00-03:00' } },
          ],
        },
        { type: 'button', sub_type: 'url', index: '0', parameters: [{ type: 'text', text: 'INV-9' }] },
        { type: 'button', sub_type: 'quick_reply', index: '1', parameters: [{ type: 'payload', payload: 'STOP_PAYLOAD' }] },
      ],
    });
  });

  it('accepts CURRENCY as text, DATE_TIME as fallback text and the URL suffix through the BUTTON variable', () => {
    const r = buildComponents(rich, {
      banner: 'https://cdn.example/b.png', name: 'Ana', amount: 'USD 3.99', due: { fallback_value: 'lunes 2 de marzo' }, code: 'X1',
    });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.components[1].parameters[1]).toEqual({ type: 'currency', currency: { fallback_value: 'USD 3.99', code: 'USD', amount_1000: 3990 } });
    expect(r.components[1].parameters[2]).toEqual({ type: 'date_time', date_time: { fallback_value: 'lunes 2 de marzo' } });
    expect(r.components[2]).toEqual({ type: 'button', sub_type: 'url', index: '0', parameters: [{ type: 'text', text: 'X1' }] });
  });

  it('reports every problem by field', () => {
    const r = buildComponents(
      rich,
      { banner: 'not a url', name: '  ', amount: 12, due: 'tomorrow', extra: 1 },
      { button_0: ['a', 'b'], button_2: 'x', btn: 'y' },
    );
    expect(r).toEqual({
      ok: false,
      errors: {
        variables: [
          "Unknown variable 'extra': the template has no such variable.",
          "Variable 'banner' (IMAGE) must be an http(s) URL.",
          "Variable 'name' (TEXT) may not be blank.",
          `Variable 'amount' (CURRENCY) must be {"amount": <number>, "code": "<ISO 4217>"} or a string like "ARS 12.50".`,
          `Variable 'due' (DATE_TIME) must be an ISO 8601 date or date-time, or {"fallback_value": "<text>"}.`,
        ],
        button_variables: [
          "'button_2': button 2 (PHONE_NUMBER) takes no variable.",
          "Invalid key 'btn': use button_0, button_1, ... (button index from 0).",
          "'button_0': URL buttons take only 1 variable.",
        ],
      },
    });
  });

  it.each([['2026-02-30'], ['2026-02-29T10:00:00Z'], ['2026-03-01T25:00'], ['2026-03-01T10:61:00-03:00'], ['2026-13-01']])(
    'refuses a DATE_TIME the calendar does not have (%s); Date.parse rolled it over', (due) => {
      expect(buildComponents(rich, { banner: 'https://cdn.example/b.jpg', name: 'Ana', amount: 'ARS 1', due }, { button_0: 'x' })).toMatchObject({
        ok: false, errors: { variables: [`Variable 'due' (DATE_TIME) must be an ISO 8601 date or date-time, or {"fallback_value": "<text>"}.`] },
      });
    });

  it.each([['2028-02-29'], ['2026-03-01 10:00'], ['2026-03-01T10:00:00.5+0300'], ['2026-03-01T23:59:59Z']])('accepts the DATE_TIME %s as written', (due) => {
    const r = buildComponents(rich, { banner: 'https://cdn.example/b.jpg', name: 'Ana', amount: 'ARS 1', due }, { button_0: 'x' });
    expect(JSON.stringify(r)).toContain(`"date_time":{"fallback_value":"${due}"}`);
  });

  it('requires required variables and the dynamic URL suffix', () => {
    const r = buildComponents(rich, {}, {});
    expect(r).toEqual({
      ok: false,
      errors: {
        // in component order (HEADER, BODY), by position within each
        variables: ["Variable 'banner' is required.", "Variable 'name' is required.", "Variable 'amount' is required.", "Variable 'due' is required."],
        button_variables: ["'button_0' is required: button 0 is a URL button with a dynamic suffix."],
      },
    });
  });

  it('a template without variables sends no components', () => {
    expect(buildComponents({ variables: [], buttons: [] }, {}, {})).toEqual({ ok: true, components: [] });
  });

  it('optional variables may be omitted; VIDEO and DOCUMENT headers take links', () => {
    const t: TemplateShape = {
      variables: [
        { name: 'clip', type: 'VIDEO', position: 1, isRequired: true, component: 'HEADER' },
        { name: 'x', type: 'TEXT', position: 1, isRequired: false, component: 'BODY' },
      ],
      buttons: [],
    };
    expect(buildComponents(t, { clip: 'https://v.example/a.mp4' })).toEqual({
      ok: true, components: [{ type: 'header', parameters: [{ type: 'video', video: { link: 'https://v.example/a.mp4' } }] }],
    });
    const d: TemplateShape = { variables: [{ name: 'pdf', type: 'DOCUMENT', position: 1, isRequired: true, component: 'HEADER' }], buttons: [] };
    expect(buildComponents(d, { pdf: 'https://d.example/a.pdf' })).toEqual({
      ok: true, components: [{ type: 'header', parameters: [{ type: 'document', document: { link: 'https://d.example/a.pdf' } }] }],
    });
  });
});
