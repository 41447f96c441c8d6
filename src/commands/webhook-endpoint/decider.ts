import { DomainError, type Decider } from '../decider';
import type { WebhookEndpointEvent, WebhookEventType } from '../../events/webhooks';

export const webhookEndpointStream = (endpointId: string): string => `webhookendpoint-${endpointId}`;

/** How long a rotated-out secret keeps signing alongside the new one. */
export const PREVIOUS_SECRET_GRACE_MS = 24 * 60 * 60 * 1000;

export type Command =
  /** `endpointsOfCompany`: the company's endpoints now; `maxEndpoints`: how many it may have (configuration) */
  | { type: 'CreateEndpoint'; endpointId: string; companyId: number; url: string; eventTypes: WebhookEventType[]; description: string | null; secret: string; now: Date; endpointsOfCompany: number; maxEndpoints: number }
  | { type: 'UpdateEndpoint'; url?: string; eventTypes?: WebhookEventType[]; description?: string | null; enabled?: boolean; now: Date }
  | { type: 'DisableEndpoint'; reason: 'gone' | 'failing'; now: Date }
  /** `rotationsBefore`: the rotations the secret was made for (a keyed rotation's secret depends on it); another count refuses */
  | { type: 'RotateSecret'; secret: string; now: Date; rotationsBefore?: number }
  | { type: 'DeleteEndpoint'; now: Date };

export type State =
  | { status: 'none' }
  | { status: 'deleted' }
  | { status: 'active'; endpointId: string; companyId: number; url: string; eventTypes: WebhookEventType[]; description: string | null; enabled: boolean; rotations: number };

export const initialState = (): State => ({ status: 'none' });

const sameTypes = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((t) => b.includes(t));

export function decide(command: Command, state: State): WebhookEndpointEvent[] {
  switch (command.type) {
    case 'CreateEndpoint': {
      if (state.status !== 'none') return []; // a retried create with the same id (its answer, even at the limit)
      if (command.endpointsOfCompany >= command.maxEndpoints) {
        throw new DomainError('ENDPOINT_LIMIT', `a company may have at most ${command.maxEndpoints} webhook endpoints: delete one it no longer uses first`);
      }
      const { endpointId, companyId, url, eventTypes, description, secret, now } = command;
      return [{ type: 'WebhookEndpointCreated', data: { endpointId, companyId, url, eventTypes, description, secret, createdAt: now.toISOString() } }];
    }
    case 'UpdateEndpoint': {
      const s = live(state);
      const events: WebhookEndpointEvent[] = [];
      const next = { url: command.url ?? s.url, eventTypes: command.eventTypes ?? s.eventTypes, description: command.description === undefined ? s.description : command.description };
      if (next.url !== s.url || !sameTypes(next.eventTypes, s.eventTypes) || next.description !== s.description) {
        events.push({ type: 'WebhookEndpointChanged', data: { endpointId: s.endpointId, companyId: s.companyId, ...next } });
      }
      const at = command.now.toISOString();
      if (command.enabled === true && !s.enabled) events.push({ type: 'WebhookEndpointEnabled', data: { endpointId: s.endpointId, companyId: s.companyId, at } });
      if (command.enabled === false && s.enabled) {
        events.push({ type: 'WebhookEndpointDisabled', data: { endpointId: s.endpointId, companyId: s.companyId, reason: 'client', at } });
      }
      return events;
    }
    case 'DisableEndpoint': {
      if (state.status !== 'active' || !state.enabled) return [];
      return [{ type: 'WebhookEndpointDisabled', data: { endpointId: state.endpointId, companyId: state.companyId, reason: command.reason, at: command.now.toISOString() } }];
    }
    case 'RotateSecret': {
      const s = live(state);
      if (command.rotationsBefore !== undefined && command.rotationsBefore !== s.rotations) {
        throw new DomainError('ROTATION_RACED', 'the endpoint was rotated since its secret was made');
      }
      const previousSecretValidUntil = new Date(command.now.getTime() + PREVIOUS_SECRET_GRACE_MS).toISOString();
      return [{ type: 'WebhookEndpointSecretRotated', data: { endpointId: s.endpointId, companyId: s.companyId, secret: command.secret, previousSecretValidUntil } }];
    }
    case 'DeleteEndpoint': {
      const s = live(state);
      return [{ type: 'WebhookEndpointDeleted', data: { endpointId: s.endpointId, companyId: s.companyId, at: command.now.toISOString() } }];
    }
    default: {
      const never: never = command;
      throw new Error(`unknown command ${(never as { type: string }).type}`);
    }
  }
}

function live(state: State): Extract<State, { status: 'active' }> {
  if (state.status !== 'active') throw new DomainError('ENDPOINT_NOT_FOUND', 'webhook endpoint not found');
  return state;
}

export function evolve(state: State, event: WebhookEndpointEvent): State {
  switch (event.type) {
    case 'WebhookEndpointCreated': {
      const { endpointId, companyId, url, eventTypes, description } = event.data;
      return { status: 'active', endpointId, companyId, url, eventTypes: [...eventTypes], description, enabled: true, rotations: 0 };
    }
    case 'WebhookEndpointChanged':
      return state.status === 'active' ? { ...state, url: event.data.url, eventTypes: [...event.data.eventTypes], description: event.data.description } : state;
    case 'WebhookEndpointDisabled':
      return state.status === 'active' ? { ...state, enabled: false } : state;
    case 'WebhookEndpointEnabled':
      return state.status === 'active' ? { ...state, enabled: true } : state;
    case 'WebhookEndpointSecretRotated':
      return state.status === 'active' ? { ...state, rotations: state.rotations + 1 } : state;
    case 'WebhookEndpointDeleted':
      return { status: 'deleted' };
  }
}

export const webhookEndpointDecider: Decider<Command, WebhookEndpointEvent, State> = { decide, evolve, initialState };
