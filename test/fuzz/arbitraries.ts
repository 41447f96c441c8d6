import fc from 'fast-check';
import { EXAMPLE, SECOND } from '../support/provisioning';

// Arbitraries and valid request bodies shared by the fuzz suites (api-fuzz.test.ts, webhooks-idempotency-fuzz.test.ts).

export const A_NUMBER = '109876543210001';
export const B_NUMBER = '109876543210002';

export const nastyConstants = [
  '', ' ', 'null', 'undefined', 'true', '0', '-1', '1.5', '1e309', 'NaN', 'Infinity', '[]', '{}', '__proto__',
  'constructor', 'prototype', '%', '%%', '%00', '%E0%A4%A', '\u0000', '\uD800', '\uFEFF', '𝕏𝕐', '٣٤٥', 'ﷺ', 'e\u0301',
  '+5491155551234', '5491155551234', '011 15 5555-1234', '+', '+0', '+99999999999999999999', '2026-13-45',
  '2026-02-30', '2026-03-01', '2026-03-01T00:00:00Z', '0000-00-00', '9999999999999999999999', "' OR 1=1 --",
  '"; DROP TABLE es.events; --', '../../etc/passwd', '<script>alert(1)</script>', '${jndi:ldap://x}', 'QUEUED', 'queued',
  'sent', 'failed', 'all', 'msgapp', 'incoming', 'classifications,trace_id', '101', '202', '101,202', '-101', '2147483648',
  '00000000-0000-0000-0000-000000000000', 'ffffffff-ffff-ffff-ffff-ffffffffffff', 'a'.repeat(10_000), '9'.repeat(5_000),
];

export const nastyString = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...nastyConstants) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 20 }) },
  { weight: 1, arbitrary: fc.integer().map(String) },
  { weight: 1, arbitrary: fc.double().map(String) },
  { weight: 1, arbitrary: fc.tuple(fc.string({ maxLength: 4 }), fc.integer({ min: 1000, max: 60_000 })).map(([s, n]) => (s || 'x').repeat(n).slice(0, 200_000)) },
);

/** Deeply nested JSON as raw text (arrays or objects), up to 20k levels. */
export const deepJson = fc.tuple(fc.integer({ min: 1, max: 20_000 }), fc.boolean()).map(([d, arr]) =>
  arr ? '['.repeat(d) + ']'.repeat(d) : '{"a":'.repeat(d) + '1' + '}'.repeat(d));

export const jsonValueText = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v) ?? 'null') },
  { weight: 3, arbitrary: nastyString.map((s) => JSON.stringify(s)) },
  { weight: 1, arbitrary: deepJson },
  { weight: 1, arbitrary: fc.constantFrom('null', 'true', '-0', '1e400', '[]', '{}', '[null]', '{"__proto__":{"x":1}}', '{"constructor":{"prototype":{"x":1}}}', '9007199254740993', '"\\ud800"') },
);

export const apiKey = fc.constantFrom<string | undefined>(
  EXAMPLE.key, EXAMPLE.key, EXAMPLE.key, EXAMPLE.key, SECOND.key, EXAMPLE.globalKey, EXAMPLE.expiredKey, undefined, '',
  'sbk_', 'sbk_global_', 'sbk_nope', 'garbage', 'Bearer x', `${EXAMPLE.key} `, EXAMPLE.key.toUpperCase(), 'sbk_' + 'a'.repeat(5000), '\u00e9\u00e9',
);

/** encodeURIComponent that turns a lone surrogate into an invalid UTF-8 escape instead of throwing. */
export function enc(s: string): string {
  try {
    return encodeURIComponent(s);
  } catch {
    return s.split(/([\uD800-\uDFFF])/).map((p) => (/^[\uD800-\uDFFF]$/.test(p) ? '%ED%A0%80' : encodeURIComponent(p))).join('');
  }
}

export const queryPart = (names: readonly string[]) => fc.tuple(
  fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...names) }, { weight: 1, arbitrary: nastyString.map((s) => s.slice(0, 50)) }),
  nastyString,
  fc.boolean(), // encode?
).map(([k, v, encode]) => (encode ? `${enc(k)}=${enc(v)}` : `${k}=${v}`.replace(/[#\s]/g, '%20')));

/** Random and adversarial query strings: known and unknown names, repeats, raw (bad) percent-encoding. */
export const queryString = (names: readonly string[]) => fc.oneof(
  fc.array(queryPart(names), { maxLength: 6 }).map((parts) => parts.join('&')),
  fc.constantFrom('', '&&&', '=', '==', '?', 'a[b]=1', 'a[]=1&a[]=2', '%', '%zz=%zz', names.map((n) => `${n}=1&${n}=2`).join('&')),
);

export const withQuery = (path: string, qs: string) => (qs ? `${path}?${qs}` : path);
export const keyHeader = (key: string | undefined): Record<string, string> => (key === undefined ? {} : { 'x-api-key': key });

/** Valid bodies the mutators start from. */
export const SEND_BODY = {
  phone_number_id: A_NUMBER, template_name: 'appointment_reminder', language: 'es', recipient_phone: '+5491155550001',
  variables: { patient_name: 'Ana', appointment_at: '2026-03-10T10:00:00-03:00' }, button_variables: { button_0: 'abc' },
};
export const BULK_BODY = {
  phone_number_id: A_NUMBER, template_name: 'appointment_reminder', language: 'es',
  recipients: [{ phone: '+5491155550002', variables: { patient_name: 'Bo', appointment_at: '2026-03-10T10:00:00-03:00' } }],
};
export const UPSERT_BODY = {
  phone: '+5491155550003', full_name: 'Fuzz Person', email: 'fuzz@example.com', source: 'api', source_detail: null,
  profile_picture: null, custom_fields: [{ key: 'plan', value: ['gold'], expires_at: null }, { custom_field_id: 502, value: ['3'] }],
};

/** A valid body with one field (possibly nested) replaced, removed, or a key added; output is raw JSON text. */
export function mutatedBody(base: Record<string, unknown>) {
  const fields = [...Object.keys(base), 'unknown_field', 'id', 'contactListId', 'phoneNumberId', '__proto__'];
  return fc.oneof(
    fc.tuple(fc.constantFrom(...fields), jsonValueText).map(([f, v]) => {
      const text = JSON.stringify({ ...base, [f]: '__SLOT__' });
      return text.replace('"__SLOT__"', v);
    }),
    fc.constantFrom(...Object.keys(base)).map((f) => {
      const copy = { ...base };
      delete copy[f];
      return JSON.stringify(copy);
    }),
    // a nested slot: inside variables / recipients[0] / custom_fields[0]
    fc.tuple(fc.constantFrom('variables', 'recipients', 'custom_fields', 'button_variables'), fc.string({ maxLength: 12 }), jsonValueText).map(([f, k, v]) => {
      const inner = f === 'recipients' ? `[{"phone":"+5491155550004",${JSON.stringify(k || 'variables')}:${v}}]`
        : f === 'custom_fields' ? `[{"key":${JSON.stringify(k || 'plan')},"value":${v}}]`
          : `{${JSON.stringify(k)}:${v}}`;
      return JSON.stringify({ ...base, [f]: '__SLOT__' }).replace('"__SLOT__"', inner);
    }),
    // duplicated keys in the raw JSON text (the last one wins in JSON.parse)
    fc.tuple(fc.constantFrom(...Object.keys(base)), jsonValueText).map(([f, v]) => {
      const text = JSON.stringify(base);
      return `{${JSON.stringify(f)}:${v},${text.slice(1)}`.replace(/}$/, `,${JSON.stringify(f)}:${v}}`);
    }),
    jsonValueText,
    fc.constantFrom('', '{', '{"a":}', '{"phone": "+1" "x": 2}', 'nul', '\u0000', '{}garbage', '[1,2,', '\uFEFF{}', "{'single':'quotes'}"),
  );
}

export const contentType = fc.constantFrom<string | undefined>(
  'application/json', 'application/json', 'application/json', 'application/json; charset=utf-8', 'APPLICATION/JSON',
  undefined, 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml',
  ';;;', 'application/json; charset=utf-16', 'application/jsonx', '*/*',
);

