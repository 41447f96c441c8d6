import { parseMessageRecord } from '../../src/commands/conversation/message-input';
import { PoisonRecordError } from '../../src/ports/transport';
import { unixToIso } from '../../src/workers/delivery-status-parsing';

// Input Postgres cannot store (instants outside years 1..9999 UTC, U+0000, unpaired surrogates) is a bad record
// at parse time, not a failed append or a projection stuck on it.

const valid = {
  id: 'm-1', companyId: 101, conversationId: 'c-1', occurredAt: '2024-01-10T07:00:00-03:00', channel: 'SOCIALMSG',
  direction: 'inbound', author: { type: 'contact', contactId: 5 }, contactPhone: '11 2233-4455',
  content: { type: 'text', text: 'hola' },
};

const reasonOf = (input: unknown): string => {
  const r = parseMessageRecord(input);
  if (r.ok) throw new Error(`accepted: ${JSON.stringify(r.message)}`);
  return r.reason;
};

describe('chat message input: instants Postgres cannot store', () => {
  it.each([
    ['year 0000', '0000-06-01T00:00:00Z'],
    ['year 10000 in UTC after normalising the offset', '9999-12-31T23:59:59-05:00'],
    ['year 0 in UTC after normalising the offset', '0001-01-01T00:30:00+01:00'],
  ])('rejects %s', (_what, occurredAt) => {
    expect(reasonOf({ ...valid, occurredAt })).toBe('occurredAt: must lie in years 0001 to 9999 (UTC)');
  });

  it('the storable range runs from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z, UTC', () => {
    expect(parseMessageRecord({ ...valid, occurredAt: '0001-01-01T00:00:00Z' })).toMatchObject({ ok: true, message: { occurredAt: '0001-01-01T00:00:00.000Z' } });
    expect(parseMessageRecord({ ...valid, occurredAt: '9999-12-31T20:59:59.999-03:00' })).toMatchObject({ ok: true, message: { occurredAt: '9999-12-31T23:59:59.999Z' } });
    expect(reasonOf({ ...valid, occurredAt: '0000-12-31T23:59:59.999Z' })).toBe('occurredAt: must lie in years 0001 to 9999 (UTC)');
    expect(reasonOf({ ...valid, occurredAt: '9999-12-31T21:00:00-03:00' })).toBe('occurredAt: must lie in years 0001 to 9999 (UTC)');
  });
});

describe('chat message input: text Postgres cannot store', () => {
  const unstorable = 'contains text that cannot be stored (U+0000 or an unpaired UTF-16 surrogate)';
  it.each([
    ['a NUL in the text', { ...valid, content: { type: 'text', text: 'a\u0000b' } }, 'content'],
    ['a lone high surrogate in the text', { ...valid, content: { type: 'text', text: 'x\uD83D' } }, 'content'],
    ['a lone low surrogate in the id', { ...valid, id: 'm-\uDE00' }, 'id'],
    ['a NUL in the conversation id', { ...valid, conversationId: 'c\u0000' }, 'conversationId'],
    ['a NUL deep in a classification value', { ...valid, classifications: [{ label: 'intent', value: { deep: ['\u0000'] } }] }, 'classifications'],
    ['a NUL in a key of an extraction value', { ...valid, extractions: [{ key: 'k', value: { 'a\u0000': 1 } }] }, 'extractions'],
    ['a lone surrogate in a tool name', { ...valid, toolCalls: [{ toolName: '\uD800', success: true, executionTimeMs: 1 }] }, 'toolCalls'],
    ['a NUL in the trace id', { ...valid, traceId: 't\u0000' }, 'traceId'],
    ['a NUL in the contact phone', { ...valid, contactPhone: '11 2233-4455\u0000' }, 'contactPhone'],
  ])('rejects %s, naming the field', (_what, input, field) => {
    expect(reasonOf(input)).toBe(`${field}: ${unstorable}`);
  });

  it('accepts paired surrogates (emoji) and ignores fields outside the contract; half of a pair is rejected', () => {
    const r = parseMessageRecord({ ...valid, content: { type: 'text', text: 'gracias \u{1F44D}' }, unknownField: '\u0000' });
    expect(r).toMatchObject({ ok: true, message: { content: { text: 'gracias \u{1F44D}' } } });
    expect(reasonOf({ ...valid, content: { type: 'text', text: 'gracias \uD83D' } })).toBe(`content: ${unstorable}`);
  });
});

describe('provider webhook timestamps (unixToIso)', () => {
  it('accepts unix seconds up to the last second of year 9999, no later', () => {
    expect(unixToIso('253402300799', 'status read of wamid.X')).toEqual({ iso: '9999-12-31T23:59:59.000Z', raw: '253402300799' });
    expect(unixToIso(1772359205, 'status read of wamid.X')).toEqual({ iso: '2026-03-01T10:00:05.000Z', raw: '1772359205' });
    expect(() => unixToIso('253402300800', 'status read of wamid.X')).toThrow(PoisonRecordError);
  });

  it('rejects a 12-digit timestamp past year 9999 as a poison record with the reason', () => {
    expect(() => unixToIso('999999999999', 'inbound message wamid.F')).toThrow(
      new PoisonRecordError('inbound message wamid.F: timestamp 999999999999 lies after year 9999'),
    );
  });
});
