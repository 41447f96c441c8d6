import { createHmac } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fc from 'fast-check';
import { anonymizeId, CompanyAnonymizer, HmacPrefix } from '../../src/shared/anonymize';
import { ExportCursorCodec, type ExportFilters } from '../../src/projections/conversations/export-cursor';
import { isoFromPg } from '../../src/projections/conversations/export';
import { parseInstant } from '../../src/http/routes/export';

describe('anonymized ids', () => {
  const secret = 'unit-secret';

  it('are prefix + the first 24 hex of HMAC-SHA256(companyKey, kind:id), companyKey = HMAC-SHA256(secret, company_id)', () => {
    const companyKey = createHmac('sha256', secret).update('42').digest();
    const expected = 'msg_' + createHmac('sha256', companyKey).update('message:wamid.ABC').digest('hex').slice(0, 24);
    expect(anonymizeId(secret, 42, 'message', 'wamid.ABC')).toBe(expected);
    const a = new CompanyAnonymizer(secret, 42);
    expect(a.message('wamid.ABC')).toBe(expected);
    expect(a.clientId).toBe('cmp_' + createHmac('sha256', companyKey).update('company:42').digest('hex').slice(0, 24));
    expect(a.id('conversation', 'c1')).toBe('conv_' + createHmac('sha256', companyKey).update('conversation:c1').digest('hex').slice(0, 24));
    expect(a.id('contact', '5')).toMatch(/^ctc_[0-9a-f]{24}$/);
    expect(a.id('agent', '5')).toMatch(/^agt_[0-9a-f]{24}$/);
    expect(a.id('operator', '5')).toMatch(/^op_[0-9a-f]{24}$/);
    // the kind is part of the input: the same real id of two kinds differs
    expect(a.id('agent', '5').slice(4)).not.toBe(a.id('contact', '5').slice(4));
  });

  it('are the same in another process, and differ per company and per secret', () => {
    // a separate node process computing the documented formula from scratch
    const other = execFileSync(process.execPath, ['-e', `
      const { createHmac } = require('node:crypto');
      const k = createHmac('sha256', ${JSON.stringify(secret)}).update('42').digest();
      process.stdout.write('msg_' + createHmac('sha256', k).update('message:wamid.ABC').digest('hex').slice(0, 24));`]).toString();
    expect(anonymizeId(secret, 42, 'message', 'wamid.ABC')).toBe(other);
    expect(anonymizeId(secret, 43, 'message', 'wamid.ABC')).not.toBe(other);
    expect(anonymizeId('another-secret', 42, 'message', 'wamid.ABC')).not.toBe(other);
  });
});

describe('HmacPrefix (midstate HMAC-SHA256)', () => {
  const reference = (key: Buffer, m: string) => createHmac('sha256', key).update(m).digest('hex').slice(0, 24);

  it('equals node:crypto for random keys and inputs (ASCII, any Unicode, lone surrogates, every block boundary, long)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 0, maxLength: 64 }), fc.oneof(fc.string(), fc.string({ unit: 'grapheme' }), fc.string({ unit: 'binary' })), (key, m) => {
        const k = Buffer.from(key);
        expect(new HmacPrefix(k).hex24(m)).toBe(reference(k, m));
      }),
      { numRuns: 2000 },
    );
    const key = createHmac('sha256', 'x').update('1').digest();
    const mac = new HmacPrefix(key);
    for (let n = 0; n <= 300; n++) expect(mac.hex24('a'.repeat(n))).toBe(reference(key, 'a'.repeat(n)));
    for (const n of [677, 678, 679, 680, 681, 1000, 5000]) {
      expect(mac.hex24('é'.repeat(n))).toBe(reference(key, 'é'.repeat(n)));
      expect(mac.hex24('\u{1F600}'.repeat(n))).toBe(reference(key, '\u{1F600}'.repeat(n)));
      expect(mac.hex24('\uD800x'.repeat(n))).toBe(reference(key, '\uD800x'.repeat(n)));
    }
    // reused scratch state does not leak between calls
    expect(mac.hex24('short')).toBe(reference(key, 'short'));
  });
});

describe('export cursor', () => {
  const filters: ExportFilters = {
    companyIds: [1, 2], from: new Date('2024-01-01T00:00:00Z'), to: new Date('2024-01-31T00:00:00Z'), channels: null, direction: null, agentIds: null,
  };
  const state = { hw: '1234', after: { occurredAt: '2024-01-10 10:00:00.123456+00', companyId: 2, messageId: 'real-id-xyz' } };

  it('round-trips for the same filters and secret, and hides the real ids', () => {
    const codec = new ExportCursorCodec('s');
    const token = codec.encode(state, filters);
    expect(token).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(Buffer.from(token, 'base64url').toString('latin1')).not.toContain('real-id');
    expect(codec.decode(token, { ...filters, from: new Date(filters.from) })).toEqual(state);
    expect(new ExportCursorCodec('s').decode(token, filters)).toEqual(state);
  });

  it('fails for other filters, another secret, or any altered byte', () => {
    const codec = new ExportCursorCodec('s');
    const token = codec.encode(state, filters);
    expect(codec.decode(token, { ...filters, companyIds: [1] })).toBeUndefined();
    expect(codec.decode(token, { ...filters, channels: ['SOCIALMSG'] })).toBeUndefined();
    expect(codec.decode(token, { ...filters, direction: 'inbound' })).toBeUndefined();
    expect(codec.decode(token, { ...filters, agentIds: [7] })).toBeUndefined();
    expect(codec.decode(token, { ...filters, to: new Date('2024-01-30T00:00:00Z') })).toBeUndefined();
    expect(new ExportCursorCodec('other').decode(token, filters)).toBeUndefined();
    const raw = Buffer.from(token, 'base64url');
    for (let i = 0; i < raw.length; i++) {
      const altered = Buffer.from(raw);
      altered[i] ^= 0x01;
      expect(codec.decode(altered.toString('base64url'), filters)).toBeUndefined();
    }
    expect(codec.decode('', filters)).toBeUndefined();
    expect(codec.decode('x'.repeat(5000), filters)).toBeUndefined();
  });
});

describe('time formats', () => {
  it.each([
    ['2024-01-10', '2024-01-10T00:00:00.000Z'],
    ['2024-01-10T10:00:00Z', '2024-01-10T10:00:00.000Z'],
    ['2024-01-10T10:00Z', '2024-01-10T10:00:00.000Z'],
    ['2024-01-10T10:00:00.123456Z', '2024-01-10T10:00:00.123Z'],
    ['2024-01-10T07:00:00-03:00', '2024-01-10T10:00:00.000Z'],
    ['2024-01-10T13:00:00 03:00', '2024-01-10T10:00:00.000Z'],
    ['2024-01-10T13:00:00+0300', '2024-01-10T10:00:00.000Z'],
    ['2024-01-10T10:00:00', '2024-01-10T10:00:00.000Z'],
    ['2024-02-29', '2024-02-29T00:00:00.000Z'],
  ])('parses %s', (input, iso) => {
    expect(parseInstant(input)?.toISOString()).toBe(iso);
  });

  it.each(['', 'yesterday', '2024-13-01', '2023-02-29', '2024-01-10T24:00:00Z', '2024-01-10T10:60Z', '10/01/2024', '1704880800', '2024-01-10T10:00:00+25:00'])(
    'rejects %j',
    (input) => {
      expect(parseInstant(input)).toBeUndefined();
    },
  );

  it('formats Postgres UTC text as ISO 8601 with milliseconds', () => {
    expect(isoFromPg('2024-01-10 10:00:00+00')).toBe('2024-01-10T10:00:00.000Z');
    expect(isoFromPg('2024-01-10 10:00:00.5+00')).toBe('2024-01-10T10:00:00.500Z');
    expect(isoFromPg('2024-01-10 10:00:00.123456+00')).toBe('2024-01-10T10:00:00.123Z');
  });
});
