import type { EventDefinition } from './define';
import { bulkEvents } from './bulk';
import { contactEvents } from './contacts';
import { conversationEvents } from './conversations';
import { provisioningEvents } from './provisioning';
import { EventRegistry } from './registry';
import { sendEvents } from './sends';
import { webhookEvents } from './webhooks';

// Every event type of the system, one import line per module. Add new modules here.
export const allEventDefinitions: readonly EventDefinition[] = [
  ...provisioningEvents,
  ...conversationEvents,
  ...contactEvents,
  ...sendEvents,
  ...bulkEvents,
  ...webhookEvents,
];

export const createEventRegistry = (): EventRegistry => new EventRegistry(allEventDefinitions);
