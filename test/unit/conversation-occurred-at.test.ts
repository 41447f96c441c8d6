import { parseMessageRecord } from '../../src/commands/conversation/message-input';

// A record's `occurredAt` is any ISO 8601 date-time with its zone (../shared/contracts/conversation-messages.md):
// extended and basic offsets, minutes without seconds, any fraction; stored as UTC with millisecond precision.

const valid = {
  id: 'm-1', companyId: 101, conversationId: 'c-1', occurredAt: '2024-01-10T07:00:00-03:00', channel: 'SOCIALMSG',
  direction: 'inbound', author: { type: 'contact', contactId: 5 }, contactPhone: '11 2233-4455',
  content: { type: 'text', text: 'hola' },
};
const stored = (occurredAt: string) => {
  const r = parseMessageRecord({ ...valid, occurredAt });
  return r.ok ? r.message.occurredAt : `rejected: ${r.reason}`;
};

describe("chat message input: occurredAt", () => {
  it.each([
    ['2026-03-01T12:00:00Z', '2026-03-01T12:00:00.000Z'],
    ['2026-03-01T12:00Z', '2026-03-01T12:00:00.000Z'],
    ['2026-03-01T15:00:00+03:00', '2026-03-01T12:00:00.000Z'],
    ['2026-03-01T15:00:00+0300', '2026-03-01T12:00:00.000Z'],
    ['2026-03-01T15:00+03', '2026-03-01T12:00:00.000Z'],
    ['2026-03-01T09:00:00.123456789-03:00', '2026-03-01T12:00:00.123Z'],
    ['2026-03-01T12:00:00.123456789012Z', '2026-03-01T12:00:00.123Z'],
    ['2026-03-01t12:00:00z', '2026-03-01T12:00:00.000Z'],
  ])('accepts %s as %s', (input, utc) => {
    expect(stored(input)).toBe(utc);
  });

  it.each([
    ['no zone', '2026-03-01T12:00:00'],
    ['a date alone', '2026-03-01'],
    ['a space for the T', '2026-03-01 12:00:00Z'],
    ['a day the month has not', '2026-02-30T12:00:00Z'],
    ['hour 24', '2026-03-01T24:00:00Z'],
    ['an offset of 24 h', '2026-03-01T12:00:00+24:00'],
    ['not a date', 'yesterday'],
  ])('rejects %s', (_what, input) => {
    expect(stored(input)).toBe('rejected: occurredAt: must be an ISO 8601 date-time with a time zone');
  });

  it('rejects a value that is not a string', () => {
    expect(stored(1767225600 as unknown as string)).toMatch(/^rejected: occurredAt: /);
  });
});
