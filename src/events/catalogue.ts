import type { EventDefinition } from './define';
import { conversationEvents } from './conversations';
import { provisioningEvents } from './provisioning';
import { EventRegistry } from './registry';

// Every event type of the system, one import line per module. Add new modules here.
export const allEventDefinitions: readonly EventDefinition[] = [
  ...provisioningEvents,
  ...conversationEvents,
];

export const createEventRegistry = (): EventRegistry => new EventRegistry(allEventDefinitions);
