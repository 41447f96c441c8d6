import { type ApiKeyEvent, apiKeyDecider, type ApiKeyIssuedData } from '../../../src/commands/provisioning/api-key/decider';
import { spec } from '../../support/decider';

const issued: ApiKeyIssuedData = {
  keyId: 'key_0123456789abcdef0123', scope: 'company', companyId: 101, userId: 7, name: 'CRM sync',
  keyHash: 'a'.repeat(64), expiresAt: null,
};
const provision = (over: Partial<ApiKeyIssuedData & { active: boolean }> = {}) =>
  ({ type: 'ProvisionApiKey' as const, data: { ...issued, active: true, ...over } });
const given: ApiKeyEvent[] = [{ type: 'ApiKeyIssued', data: issued }];
const revoked: ApiKeyEvent = { type: 'ApiKeyRevoked', data: { keyId: issued.keyId, reason: 'inactive in the provisioning fixture' } };

describe('API key decider', () => {
  describe('ProvisionApiKey', () => {
    it('given nothing, issues the key', () => {
      spec(apiKeyDecider).given([]).when(provision()).then([{ type: 'ApiKeyIssued', data: issued }]);
    });

    it('given nothing and active false, issues then revokes', () => {
      spec(apiKeyDecider).given([]).when(provision({ active: false })).then([{ type: 'ApiKeyIssued', data: issued }, revoked]);
    });

    it('given the same key, decides nothing', () => {
      spec(apiKeyDecider).given(given).when(provision()).then([]);
    });

    it('the same instant spelled differently is no change', () => {
      spec(apiKeyDecider).given([{ type: 'ApiKeyIssued', data: { ...issued, expiresAt: '2027-01-01T00:00:00.000Z' } }])
        .when(provision({ expiresAt: '2026-12-31T21:00:00-03:00' })).then([]);
    });

    it('an expiry change is ApiKeyExpiryChanged', () => {
      spec(apiKeyDecider).given(given).when(provision({ expiresAt: '2027-01-01T00:00:00.000Z' }))
        .then([{ type: 'ApiKeyExpiryChanged', data: { keyId: issued.keyId, expiresAt: '2027-01-01T00:00:00.000Z' } }]);
    });

    it('active false revokes once', () => {
      spec(apiKeyDecider).given(given).when(provision({ active: false })).then([revoked]);
      spec(apiKeyDecider).given([...given, revoked]).when(provision({ active: false })).then([]);
    });

    it('revocation is permanent', () => {
      spec(apiKeyDecider).given([...given, revoked]).when(provision()).thenThrows('KEY_REVOKED');
    });

    it('name and user of an issued key are fixed', () => {
      spec(apiKeyDecider).given(given).when(provision({ name: 'Other' })).thenThrows('KEY_IMMUTABLE');
      spec(apiKeyDecider).given(given).when(provision({ userId: 8 })).thenThrows('KEY_IMMUTABLE');
    });

    it('a key issued to another company cannot be provisioned for this one', () => {
      spec(apiKeyDecider).given(given).when(provision({ companyId: 202 })).thenThrows('KEY_OF_ANOTHER_OWNER');
      spec(apiKeyDecider).given(given).when(provision({ scope: 'global', companyId: null, userId: null })).thenThrows('KEY_OF_ANOTHER_OWNER');
    });

    it('scope and company must agree', () => {
      spec(apiKeyDecider).given([]).when(provision({ scope: 'global' })).thenThrows('INVALID_KEY');
      spec(apiKeyDecider).given([]).when(provision({ companyId: null })).thenThrows('INVALID_KEY');
    });
  });

  describe('RevokeApiKey', () => {
    it('revokes an issued key', () => {
      spec(apiKeyDecider).given(given).when({ type: 'RevokeApiKey', data: { keyId: issued.keyId, reason: 'leaked' } })
        .then([{ type: 'ApiKeyRevoked', data: { keyId: issued.keyId, reason: 'leaked' } }]);
    });

    it('is idempotent', () => {
      spec(apiKeyDecider).given([...given, revoked]).when({ type: 'RevokeApiKey', data: { keyId: issued.keyId } }).then([]);
    });

    it('rejects an unknown key', () => {
      spec(apiKeyDecider).given([]).when({ type: 'RevokeApiKey', data: { keyId: issued.keyId } }).thenThrows('KEY_NOT_FOUND');
    });
  });
});
