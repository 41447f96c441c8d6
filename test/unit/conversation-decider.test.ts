import {
  conversationDecider,
  conversationEventId,
  type CompanyDirectoryView,
  type ConversationCommand,
  type MessageToRecord,
  occurrenceOf,
} from '../../src/commands/conversation/decider';
import { parseMessageRecord } from '../../src/commands/conversation/message-input';
import type { ConversationEvent } from '../../src/events/conversations';
import { spec } from '../support/decider';

const directory: CompanyDirectoryView = { companyKnown: true, agentIds: new Set([7]), operatorIds: new Set([9]) };

const message = (over: Partial<MessageToRecord> = {}): MessageToRecord => ({
  companyId: 101,
  messageId: 'm-1',
  conversationId: 'c-1',
  occurredAt: '2024-01-10T10:00:00.000Z',
  channel: 'PROVIDER_MSGAPP',
  direction: 'inbound',
  author: { type: 'contact', contactId: 5 },
  contactPhone: '+5491122334455',
  content: { type: 'text', text: 'hi', mediaUrl: null, mediaMime: null },
  replyToMessageId: null,
  classifications: [],
  extractions: [],
  toolCalls: [],
  traceId: null,
  deleted: false,
  ...over,
});

const record = (m: MessageToRecord, dir: CompanyDirectoryView = directory, recordedInConversation: string | null = null): ConversationCommand => ({
  type: 'RecordMessage',
  data: { message: m, directory: dir, recordedInConversation },
});

const recorded = (m: MessageToRecord): ConversationEvent => {
  const { deleted: _d, ...data } = m;
  return { type: 'MessageRecorded', data };
};
const deleted = (m: MessageToRecord): ConversationEvent => ({
  type: 'MessageDeleted',
  data: { companyId: m.companyId, messageId: m.messageId, conversationId: m.conversationId },
});
const restored = (m: MessageToRecord): ConversationEvent => ({
  type: 'MessageRestored',
  data: { companyId: m.companyId, messageId: m.messageId, conversationId: m.conversationId },
});

describe('conversation decider: RecordMessage', () => {
  const d = spec(conversationDecider);

  it('records a new message', () => {
    const m = message();
    d.given([]).when(record(m)).then([recorded(m)]);
  });

  it('records a message that arrives already deleted, then deletes it', () => {
    const m = message({ deleted: true });
    d.given([]).when(record(m)).then([recorded(m), deleted(m)]);
  });

  it('is a no-op for an id already recorded (also with other content)', () => {
    const m = message();
    d.given([recorded(m)]).when(record(message({ content: { type: 'text', text: 'edited', mediaUrl: null, mediaMime: null } }))).then([]);
  });

  it('deletes an already recorded message when the record now says deleted', () => {
    const m = message();
    d.given([recorded(m)]).when(record(message({ deleted: true }))).then([deleted(m)]);
  });

  it('a deleted message deleted again changes nothing', () => {
    const m = message();
    d.given([recorded(m), deleted(m)]).when(record(message({ deleted: true }))).then([]);
  });

  it('restores a deleted message when a record says deleted: false (the latest record wins)', () => {
    const m = message();
    d.given([recorded(m), deleted(m)]).when(record(message({ deleted: false }))).then([restored(m)]);
    // also when the record that first created it said deleted: true
    d.given([recorded(m), deleted(m)]).when(record(message({ deleted: false, content: { type: 'text', text: 'edited', mediaUrl: null, mediaMime: null } })))
      .then([restored(m)]);
  });

  it('a restored message restored again changes nothing; deleted again, it is deleted again', () => {
    const m = message();
    d.given([recorded(m), deleted(m), restored(m)]).when(record(message({ deleted: false }))).then([]);
    d.given([recorded(m), deleted(m), restored(m)]).when(record(message({ deleted: true }))).then([deleted(m)]);
    d.given([recorded(m), deleted(m), restored(m), deleted(m)]).when(record(message({ deleted: false }))).then([restored(m)]);
  });

  it('a record that restores a message is not validated against the directory again', () => {
    const m = message({ direction: 'outbound', author: { type: 'agent', agentId: 7 } });
    d.given([recorded(m), deleted(m)])
      .when(record(message({ ...m, deleted: false }), { companyKnown: true, agentIds: new Set(), operatorIds: new Set() }))
      .then([restored(m)]);
  });

  it('an already recorded id is a no-op even when the directory changed since', () => {
    const m = message({ direction: 'outbound', author: { type: 'agent', agentId: 7 } });
    d.given([recorded(m)]).when(record(m, { companyKnown: true, agentIds: new Set(), operatorIds: new Set() })).then([]);
  });

  it('records authors the company has: agent, operator, system', () => {
    for (const m of [
      message({ messageId: 'a', direction: 'outbound', author: { type: 'agent', agentId: 7 }, traceId: 't-1' }),
      message({ messageId: 'o', direction: 'outbound', author: { type: 'human_operator', operatorId: 9 } }),
      message({ messageId: 's', direction: 'outbound', author: { type: 'system' } }),
    ]) {
      d.given([]).when(record(m)).then([recorded(m)]);
    }
  });

  it('rejects an author agent the company does not have', () => {
    d.given([]).when(record(message({ direction: 'outbound', author: { type: 'agent', agentId: 8 } }))).thenThrows('UNKNOWN_AGENT');
  });

  it('rejects an author operator the company does not have', () => {
    d.given([]).when(record(message({ direction: 'outbound', author: { type: 'human_operator', operatorId: 1 } }))).thenThrows('UNKNOWN_OPERATOR');
  });

  it('rejects a message of a company that is not known', () => {
    d.given([]).when(record(message(), { companyKnown: false, agentIds: new Set(), operatorIds: new Set() })).thenThrows('UNKNOWN_COMPANY');
  });

  it('rejects an unknown channel, a missing id, an unknown content type', () => {
    d.given([]).when(record(message({ channel: 'FAX' as never }))).thenThrows('UNKNOWN_CHANNEL');
    d.given([]).when(record(message({ messageId: ' ' }))).thenThrows('MESSAGE_ID_MISSING');
    d.given([]).when(record(message({ content: { type: 'hologram' as never, text: '', mediaUrl: null, mediaMime: null } }))).thenThrows('UNKNOWN_CONTENT_TYPE');
  });

  it('rejects a direction that contradicts the author', () => {
    d.given([]).when(record(message({ direction: 'outbound' }))).thenThrows('DIRECTION_MISMATCH');
    d.given([]).when(record(message({ direction: 'inbound', author: { type: 'system' } }))).thenThrows('DIRECTION_MISMATCH');
  });

  it('rejects an id already recorded in another conversation of the company', () => {
    d.given([]).when(record(message(), directory, 'c-other')).thenThrows('DUPLICATE_MESSAGE_ID');
    d.given([]).when(record(message(), directory, 'c-1')).then([recorded(message())]);
  });
});

describe('conversation event ids', () => {
  it('are deterministic per company, conversation, message and type, and uuid-shaped', () => {
    const a = conversationEventId(101, 'c-1', 'm-1', 'MessageRecorded');
    expect(a).toBe(conversationEventId(101, 'c-1', 'm-1', 'MessageRecorded'));
    expect(a).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(new Set([
      a,
      conversationEventId(102, 'c-1', 'm-1', 'MessageRecorded'),
      conversationEventId(101, 'c-2', 'm-1', 'MessageRecorded'),
      conversationEventId(101, 'c-1', 'm-2', 'MessageRecorded'),
      conversationEventId(101, 'c-1', 'm-1', 'MessageDeleted'),
      conversationEventId(101, 'c-1', 'm-1', 'MessageDeleted', 2),
      conversationEventId(101, 'c-1', 'm-1', 'MessageRestored'),
    ]).size).toBe(7);
    // the first occurrence keeps the id it had before restores existed
    expect(conversationEventId(101, 'c-1', 'm-1', 'MessageDeleted', 1)).toBe(conversationEventId(101, 'c-1', 'm-1', 'MessageDeleted'));
    expect(conversationEventId(101, 'c:1', 'm-1', 'MessageDeleted', 2)).not.toBe(conversationEventId(101, 'c:1', 'm-1', 'MessageDeleted'));
  });

  it('number each deletion and restore of a message: deleted, restored and deleted again is a new event', () => {
    const m = message();
    const state = conversationDecider.initialState();
    const occurrences = [recorded(m), deleted(m), restored(m), deleted(m), restored(m)].map((e) => {
      conversationDecider.evolve(state, e);
      return `${e.type}#${occurrenceOf(state, e)}`;
    });
    expect(occurrences).toEqual(['MessageRecorded#1', 'MessageDeleted#1', 'MessageRestored#1', 'MessageDeleted#2', 'MessageRestored#2']);
  });
});

describe('input contract parsing', () => {
  const valid = {
    id: 'm-1', companyId: 101, conversationId: 'c-1', occurredAt: '2024-01-10T07:00:00-03:00', channel: 'SOCIALMSG',
    direction: 'inbound', author: { type: 'contact', contactId: 5 }, contactPhone: '11 2233-4455',
    content: { type: 'text', text: 'hola' },
  };

  it('normalizes the phone to E.164, the time to UTC ISO, and fills defaults', () => {
    const r = parseMessageRecord(valid);
    expect(r).toEqual({
      ok: true,
      message: {
        companyId: 101, messageId: 'm-1', conversationId: 'c-1', occurredAt: '2024-01-10T10:00:00.000Z', channel: 'SOCIALMSG',
        direction: 'inbound', author: { type: 'contact', contactId: 5 }, contactPhone: '+5491122334455',
        content: { type: 'text', text: 'hola', mediaUrl: null, mediaMime: null }, replyToMessageId: null,
        classifications: [], extractions: [], toolCalls: [], traceId: null, deleted: false,
      },
    });
  });

  it.each([
    [{ ...valid, channel: 'FAX' }, /^channel: must be one of PROVIDER_MSGAPP/],
    [{ ...valid, id: undefined }, /^id: /],
    [{ ...valid, id: '' }, /^id: is missing/],
    [{ ...valid, occurredAt: '2024-01-10 10:00' }, /^occurredAt: must be an ISO 8601 date-time/],
    [{ ...valid, author: { type: 'agent' } }, /^author\.agentId: /],
    [{ ...valid, author: { type: 'robot' } }, /^author\.type: must be one of contact, agent, human_operator, system/],
    [{ ...valid, contactPhone: 'not a phone' }, /^contactPhone: is not a valid phone number \(11 characters, 0 digits\)$/],
    [{ ...valid, content: { type: 'hologram' } }, /^content\.type: must be one of text/],
    [[1, 2], /^record: must be a JSON object/],
  ])('rejects an invalid record with the reason (%#)', (input, reason) => {
    const r = parseMessageRecord(input);
    expect(r.ok).toBe(false);
    expect((r as { reason: string }).reason).toMatch(reason);
  });
});
