// The chat-history message of a template the service sent (single or bulk): one builder, so the export shows
// both alike. The conversation of the provider channel is `msgapp-{phone_number_id}-{contact digits}`
// (deterministic, so a template and the contact's replies on that number share one conversation).
import type { ConversationEvent } from './conversations';

export type MessageRecordedData = Extract<ConversationEvent, { type: 'MessageRecorded' }>['data'];
export const providerConversationId = (phoneNumberId: string, contactE164: string): string =>
  `msgapp-${phoneNumberId}-${contactE164.replace(/^\+/, '')}`;

export const emptyExtras = (): Pick<MessageRecordedData, 'classifications' | 'extractions' | 'toolCalls' | 'traceId'> => ({
  classifications: [], extractions: [], toolCalls: [], traceId: null,
});

/** The outbound message of an accepted template send (content `notification_template`, author `system`). */
export function outboundTemplateMessage(send: {
  companyId: number;
  phoneNumberId: string;
  templateName: string;
  language: string;
  recipientE164: string;
  variables: Record<string, unknown>;
  providerMessageId: string;
  at: string;
}): MessageRecordedData {
  const shown = Object.entries(send.variables).map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
  return {
    companyId: send.companyId,
    messageId: send.providerMessageId,
    conversationId: providerConversationId(send.phoneNumberId, send.recipientE164),
    occurredAt: send.at,
    channel: 'PROVIDER_MSGAPP',
    direction: 'outbound',
    author: { type: 'system' },
    contactPhone: send.recipientE164,
    content: {
      type: 'notification_template',
      text: `[template ${send.templateName} (${send.language})]${shown.length ? ` ${shown.join(', ')}` : ''}`,
      mediaUrl: null,
      mediaMime: null,
    },
    replyToMessageId: null,
    ...emptyExtras(),
  };
}
