import { type Decider, DomainError } from '../../decider';
import type { EventOf } from '../../../events/define';
import type { ApiKeyEvent, ApiKeyIssued } from '../../../events/provisioning';
import { sameInstant } from '../equal';

// Aggregate: one API key. Stream `apikey-{keyId}` (keyId derived from the keyed hash, so provisioning the same
// clear key twice addresses the same stream). The clear key never reaches an event: only its keyed hash.
// Rules: owner (scope, company), name and user of an issued key are fixed; revocation is permanent.

export const apiKeyStreamId = (keyId: string): string => `apikey-${keyId}`;

export type { ApiKeyEvent };
export type ApiKeyIssuedData = EventOf<typeof ApiKeyIssued>['data'];

export type ApiKeyCommand =
  /** desired state of a key: issue it when new, then align expiry and revocation */
  | { type: 'ProvisionApiKey'; data: ApiKeyIssuedData & { active: boolean } }
  | { type: 'RevokeApiKey'; data: { keyId: string; reason?: string } };

export interface ApiKeyState {
  issued: ApiKeyIssuedData | null;
  revoked: boolean;
  expiresAt: string | null;
}

const initialState = (): ApiKeyState => ({ issued: null, revoked: false, expiresAt: null });

function evolve(state: ApiKeyState, event: ApiKeyEvent): ApiKeyState {
  switch (event.type) {
    case 'ApiKeyIssued':
      return { issued: event.data, revoked: false, expiresAt: event.data.expiresAt };
    case 'ApiKeyRevoked':
      return { ...state, revoked: true };
    case 'ApiKeyExpiryChanged':
      return { ...state, expiresAt: event.data.expiresAt };
    default:
      return state;
  }
}

function decide(command: ApiKeyCommand, state: ApiKeyState): ApiKeyEvent[] {
  switch (command.type) {
    case 'ProvisionApiKey': {
      const { active, ...desired } = command.data;
      if (desired.scope === 'global' && desired.companyId !== null) throw new DomainError('INVALID_KEY', 'a global key has no company');
      if (desired.scope === 'company' && desired.companyId === null) throw new DomainError('INVALID_KEY', 'a company key needs its company');
      const revoke: ApiKeyEvent = { type: 'ApiKeyRevoked', data: { keyId: desired.keyId, reason: 'inactive in the provisioning fixture' } };
      const issued = state.issued;
      if (issued === null) return active ? [{ type: 'ApiKeyIssued', data: desired }] : [{ type: 'ApiKeyIssued', data: desired }, revoke];

      if (issued.keyHash !== desired.keyHash || issued.scope !== desired.scope || issued.companyId !== desired.companyId) {
        throw new DomainError('KEY_OF_ANOTHER_OWNER', `this key is already issued to ${issued.scope === 'global' ? 'the global scope' : `company ${issued.companyId}`}`);
      }
      if (issued.name !== desired.name || issued.userId !== desired.userId) {
        throw new DomainError(
          'KEY_IMMUTABLE',
          `the name and user of an issued key cannot change (issued as "${issued.name}", user ${issued.userId ?? 'none'}); issue a new key instead`,
        );
      }
      if (state.revoked && active) {
        throw new DomainError('KEY_REVOKED', 'this key was revoked and revocation is permanent: set active to false or issue a new key');
      }
      const events: ApiKeyEvent[] = [];
      if (!sameInstant(state.expiresAt, desired.expiresAt)) {
        events.push({ type: 'ApiKeyExpiryChanged', data: { keyId: desired.keyId, expiresAt: desired.expiresAt } });
      }
      if (!active && !state.revoked) events.push(revoke);
      return events;
    }
    case 'RevokeApiKey': {
      if (state.issued === null) throw new DomainError('KEY_NOT_FOUND', `no API key ${command.data.keyId}`);
      if (state.revoked) return [];
      return [{ type: 'ApiKeyRevoked', data: command.data.reason === undefined ? { keyId: command.data.keyId } : { keyId: command.data.keyId, reason: command.data.reason } }];
    }
    default: {
      const never: never = command;
      throw new DomainError('UNKNOWN_COMMAND', `unknown command ${JSON.stringify(never)}`);
    }
  }
}

export const apiKeyDecider: Decider<ApiKeyCommand, ApiKeyEvent, ApiKeyState> = { decide, evolve, initialState };
