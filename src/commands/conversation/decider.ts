import { createHash } from 'node:crypto';
import { type Decider, DomainError } from '../decider';
import { CHANNELS, CONTENT_TYPES, type ConversationEvent } from '../../events/conversations';

// Aggregate: one conversation of one company, stream `conversation-{companyId}-{conversationId}`.
// It knows which message ids it has recorded, which of them are deleted, and how often each was deleted and restored.

export const conversationStreamId = (companyId: number, conversationId: string): string =>
  `conversation-${companyId}-${conversationId}`;

export type MessageRecordedData = Extract<ConversationEvent, { type: 'MessageRecorded' }>['data'];

/** A chat message to record (the contract's record, normalized: E.164 phone, ISO timestamp). */
export interface MessageToRecord extends MessageRecordedData {
  /** a deleted message is excluded from the export; a later record with `deleted: false` restores it */
  deleted: boolean;
}

/** What the company has, loaded by the handler from the read model (the decider never reads one). */
export interface CompanyDirectoryView {
  companyKnown: boolean;
  agentIds: ReadonlySet<number>;
  operatorIds: ReadonlySet<number>;
}

export type ConversationCommand = {
  type: 'RecordMessage';
  data: {
    message: MessageToRecord;
    directory: CompanyDirectoryView;
    /** the conversation this message id is already recorded in, when it is another one (from the read model) */
    recordedInConversation?: string | null;
  };
};

export interface MessageState {
  deleted: boolean;
  /** MessageDeleted / MessageRestored events of this message so far (each one's event id names its occurrence) */
  deletions: number;
  restores: number;
}

export interface ConversationState {
  messages: Map<string, MessageState>;
}

const CHANNEL_SET: ReadonlySet<string> = new Set(CHANNELS);
const CONTENT_TYPE_SET: ReadonlySet<string> = new Set(CONTENT_TYPES);

function validate(cmd: ConversationCommand['data']): void {
  const { message: m, directory } = cmd;
  if (typeof m.messageId !== 'string' || m.messageId.trim() === '') throw new DomainError('MESSAGE_ID_MISSING', 'id is missing');
  if (typeof m.conversationId !== 'string' || m.conversationId.trim() === '') {
    throw new DomainError('CONVERSATION_ID_MISSING', 'conversationId is missing');
  }
  if (!CHANNEL_SET.has(m.channel)) throw new DomainError('UNKNOWN_CHANNEL', `unknown channel ${JSON.stringify(m.channel)}`);
  if (!CONTENT_TYPE_SET.has(m.content.type)) {
    throw new DomainError('UNKNOWN_CONTENT_TYPE', `unknown content type ${JSON.stringify(m.content.type)}`);
  }
  if (!directory.companyKnown) throw new DomainError('UNKNOWN_COMPANY', `company ${m.companyId} is not known`);
  const a = m.author;
  switch (a.type) {
    case 'contact':
      if (m.direction !== 'inbound') throw new DomainError('DIRECTION_MISMATCH', 'a message authored by a contact must be inbound');
      break;
    case 'agent':
      if (a.agentId === undefined) throw new DomainError('AUTHOR_INVALID', 'author.agentId is missing');
      if (!directory.agentIds.has(a.agentId)) {
        throw new DomainError('UNKNOWN_AGENT', `author agent ${a.agentId} is not an agent of company ${m.companyId}`);
      }
      break;
    case 'human_operator':
      if (a.operatorId === undefined) throw new DomainError('AUTHOR_INVALID', 'author.operatorId is missing');
      if (!directory.operatorIds.has(a.operatorId)) {
        throw new DomainError('UNKNOWN_OPERATOR', `author operator ${a.operatorId} is not an operator of company ${m.companyId}`);
      }
      break;
    case 'system':
      break;
  }
  if (a.type !== 'contact' && m.direction !== 'outbound') {
    throw new DomainError('DIRECTION_MISMATCH', `a message authored by ${a.type === 'human_operator' ? 'an operator' : `the ${a.type}`} must be outbound`);
  }
  if (cmd.recordedInConversation && cmd.recordedInConversation !== m.conversationId) {
    throw new DomainError(
      'DUPLICATE_MESSAGE_ID',
      `message id ${JSON.stringify(m.messageId)} is already recorded in another conversation of company ${m.companyId}`,
    );
  }
}

export const conversationDecider: Decider<ConversationCommand, ConversationEvent, ConversationState> = {
  initialState: () => ({ messages: new Map() }),

  decide(command, state) {
    switch (command.type) {
      case 'RecordMessage': {
        const { message } = command.data;
        const known = state.messages.get(message.messageId);
        if (known) {
          // Idempotent: the same id again is a no-op, unless its deletion state changes (the latest record wins)
          if (message.deleted === known.deleted) return [];
          return [{ type: message.deleted ? 'MessageDeleted' : 'MessageRestored', data: messageRef(message) }];
        }
        validate(command.data);
        const { deleted: _deleted, ...data } = message;
        const recorded: ConversationEvent = { type: 'MessageRecorded', data };
        return message.deleted ? [recorded, { type: 'MessageDeleted', data: messageRef(message) }] : [recorded];
      }
    }
  },

  // Updates the accumulator it is given (O(1) per event; a stream can hold many messages). Callers fold from
  // `initialState()` and never share a state between folds.
  evolve(state, event) {
    switch (event.type) {
      case 'MessageRecorded':
        messageIn(state, event.data.messageId);
        return state;
      case 'MessageDeleted': {
        const m = messageIn(state, event.data.messageId);
        m.deleted = true;
        m.deletions++;
        return state;
      }
      case 'MessageRestored': {
        const m = messageIn(state, event.data.messageId);
        m.deleted = false;
        m.restores++;
        return state;
      }
    }
  },
};

function messageIn(state: ConversationState, messageId: string): MessageState {
  let m = state.messages.get(messageId);
  if (!m) state.messages.set(messageId, (m = { deleted: false, deletions: 0, restores: 0 }));
  return m;
}

function messageRef(m: MessageToRecord) {
  return { companyId: m.companyId, messageId: m.messageId, conversationId: m.conversationId };
}

/**
 * Which occurrence of its type `event` is for its message, in a state that has evolved it: 1 for MessageRecorded
 * and for a message's first deletion, n for its n-th deletion or restore. Part of the event id, so a message
 * deleted, restored and deleted again appends a new event where the same deletion redelivered is recognised.
 */
export function occurrenceOf(state: ConversationState, event: ConversationEvent): number {
  const m = state.messages.get(event.data.messageId);
  switch (event.type) {
    case 'MessageRecorded':
      return 1;
    case 'MessageDeleted':
      return m?.deletions || 1;
    case 'MessageRestored':
      return m?.restores || 1;
  }
}

/**
 * Deterministic event id of a conversation event (uuid shape): the same company, conversation, message, event
 * type and occurrence (`occurrenceOf`) always give the same id, so a redelivered record is recognised by the
 * store, never duplicated.
 */
export function conversationEventId(companyId: number, conversationId: string, messageId: string, eventType: string, occurrence = 1): string {
  // the first occurrence keeps the name every event had before messages could be restored
  const type = occurrence > 1 ? `${eventType}#${occurrence}` : eventType;
  // Joined with `:`, conversation "a:b" + message "c" and conversation "a" + message "b:c" would share an id (the
  // second append then failed for ever). Ids without a colon keep the name they always had.
  const name = conversationId.includes(':') || messageId.includes(':')
    ? `switchboard:conversation:json:${JSON.stringify([companyId, conversationId, messageId, type])}`
    : `switchboard:conversation:${companyId}:${conversationId}:${messageId}:${type}`;
  const h = createHash('sha256').update(name).digest();
  h[6] = (h[6] & 0x0f) | 0x50; // version 5 (name-based)
  h[8] = (h[8] & 0x3f) | 0x80; // RFC 4122 variant
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}
