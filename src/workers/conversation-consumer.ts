import { ConversationRecorder } from '../commands/conversation/handler';
import { parseMessageRecord } from '../commands/conversation/message-input';
import { type IncomingRecord, PoisonRecordError } from '../ports/transport';
import type { Services } from '../services';

export const CONVERSATION_TOPIC = 'conversation.messages';
export const CONVERSATION_GROUP = 'switchboard-conversations';

export interface ConversationConsumerOptions {
  topic?: string;
  groupId?: string;
}

/**
 * Chat messages of the platform in (topic `conversation.messages`, key = companyId, value = one record of
 * `contracts/conversation-messages.md`). A record that can never be recorded (malformed, unknown channel,
 * an author the company does not have, ...) goes to `conversation.messages.dlq` with the reason; anything else
 * that fails (database, event store) is retried by the transport without committing. Redelivery is harmless:
 * event ids are deterministic and a recorded id is a no-op.
 */
export async function startConversationConsumer(services: Services, options: ConversationConsumerOptions = {}) {
  const topic = options.topic ?? CONVERSATION_TOPIC;
  const recorder = new ConversationRecorder(services);
  const handle = async (record: IncomingRecord): Promise<void> => {
    const parsed = parseMessageRecord(record.value);
    if (!parsed.ok) throw new PoisonRecordError(`invalid record: ${parsed.reason}`);
    const where = record.partition !== undefined ? `${record.topic}/${record.partition}/${record.offset}` : record.topic;
    const { outcomes } = await recorder.record([parsed.message], { actor: 'conversation-consumer', causationId: where });
    const outcome = outcomes[0];
    if (outcome.status === 'rejected') throw new PoisonRecordError(`${outcome.code}: ${outcome.reason}`);
  };
  const subscription = await services.transport.subscribe(topic, handle, {
    groupId: options.groupId ?? CONVERSATION_GROUP,
    onDeadLetter: (record, reason) => {
      services.metrics.deadLetters.labels(record.topic).inc();
      services.logger.warn({ topic: record.topic, partition: record.partition, offset: record.offset, reason }, 'chat message dead-lettered');
    },
  });
  return {
    stop: () => subscription.stop(),
  };
}
