// Pure builders of the inbound messages of provider webhooks for the chat history (the outbound template
// message of a send is built by src/events/template-messages.ts, shared with bulk sends).
import { emptyExtras, type MessageRecordedData, providerConversationId } from '../../events/template-messages';

type ContentType = MessageRecordedData['content']['type'];

const isObject = (v: unknown): v is Record<string, any> => typeof v === 'object' && v !== null && !Array.isArray(v);
const s = (v: unknown): string => (typeof v === 'string' ? v : '');
const sOrNull = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);

/** The content of a provider message (`messages[]` item) in the export's terms. */
export function contentOfProviderMessage(message: Record<string, any>): MessageRecordedData['content'] {
  const type = s(message.type);
  const media = (kind: ContentType, m: unknown) => ({
    type: kind,
    text: isObject(m) ? s(m.caption) : '',
    mediaUrl: isObject(m) ? sOrNull(m.link) ?? sOrNull(m.url) : null,
    mediaMime: isObject(m) ? sOrNull(m.mime_type) : null,
  });
  switch (type) {
    case 'text':
      return { type: 'text', text: isObject(message.text) ? s(message.text.body) : '', mediaUrl: null, mediaMime: null };
    case 'image':
    case 'video':
    case 'audio':
    case 'sticker':
      return media(type, message[type]);
    case 'document':
      return media('file', message.document);
    case 'location': {
      const l = isObject(message.location) ? message.location : {};
      const parts = [l.name, l.address].filter((x) => typeof x === 'string' && x !== '');
      const coords = typeof l.latitude === 'number' && typeof l.longitude === 'number' ? `${l.latitude},${l.longitude}` : '';
      return { type: 'location', text: [...parts, coords].filter(Boolean).join(' '), mediaUrl: null, mediaMime: null };
    }
    case 'contacts': {
      const names = Array.isArray(message.contacts)
        ? message.contacts.map((c: any) => (isObject(c) && isObject(c.name) ? s(c.name.formatted_name) : '')).filter(Boolean)
        : [];
      return { type: 'contact', text: names.join(', '), mediaUrl: null, mediaMime: null };
    }
    case 'button':
      return { type: 'text', text: isObject(message.button) ? s(message.button.text) || s(message.button.payload) : '', mediaUrl: null, mediaMime: null };
    case 'interactive': {
      const i = isObject(message.interactive) ? message.interactive : {};
      const reply = isObject(i.button_reply) ? i.button_reply : isObject(i.list_reply) ? i.list_reply : {};
      return { type: 'text', text: s(reply.title), mediaUrl: null, mediaMime: null };
    }
    case 'reaction':
      return { type: 'text', text: isObject(message.reaction) ? s(message.reaction.emoji) : '', mediaUrl: null, mediaMime: null };
    default:
      return { type: 'system', text: type ? `unsupported message type: ${type}` : 'unsupported message', mediaUrl: null, mediaMime: null };
  }
}

/** The inbound message of a provider webhook, for a company and a contact already resolved. */
export function inboundProviderMessage(input: {
  companyId: number;
  phoneNumberId: string;
  contactE164: string;
  contactId: number | null;
  message: Record<string, any>;
  occurredAt: string;
}): MessageRecordedData {
  const context = isObject(input.message.context) ? input.message.context : {};
  return {
    companyId: input.companyId,
    messageId: s(input.message.id),
    conversationId: providerConversationId(input.phoneNumberId, input.contactE164),
    occurredAt: input.occurredAt,
    channel: 'PROVIDER_MSGAPP',
    direction: 'inbound',
    author: { type: 'contact', contactId: input.contactId },
    contactPhone: input.contactE164,
    content: contentOfProviderMessage(input.message),
    replyToMessageId: sOrNull(context.id),
    ...emptyExtras(),
  };
}
