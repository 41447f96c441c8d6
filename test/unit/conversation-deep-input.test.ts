import { parseMessageRecord } from '../../src/commands/conversation/message-input';

// A value JSON.parse accepts at any depth can overflow the stack of JSON.stringify when it is appended: the parser
// shared by `import-messages` and the Kafka consumer refuses it as a bad record, as HTTP bodies are (64 levels).

const valid = {
  id: 'm-1', companyId: 101, conversationId: 'c-1', occurredAt: '2024-01-10T07:00:00-03:00', channel: 'SOCIALMSG',
  direction: 'inbound', author: { type: 'contact', contactId: 5 }, contactPhone: '11 2233-4455',
  content: { type: 'text', text: 'hola' },
};

const nested = (depth: number): unknown => JSON.parse('['.repeat(depth) + ']'.repeat(depth));

describe('chat message input: nesting depth', () => {
  it('refuses a classification value nested 100,000 deep as a bad record with its reason', () => {
    const result = parseMessageRecord({ ...valid, classifications: [{ label: 'x', value: nested(100_000) }] });
    expect(result).toEqual({ ok: false, reason: 'record: nests objects and arrays deeper than 64 levels' });
  });

  it('refuses an extraction value just past the limit and accepts one at it', () => {
    // the record itself, extractions[] and the entry take three levels
    expect(parseMessageRecord({ ...valid, extractions: [{ key: 'k', value: nested(62) }] }).ok).toBe(false);
    expect(parseMessageRecord({ ...valid, extractions: [{ key: 'k', value: nested(61) }] }).ok).toBe(true);
  });
});
