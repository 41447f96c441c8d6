import { type CompanyEvent, companyDecider, MAX_RATE_LIMIT_PER_MINUTE } from '../../../src/commands/provisioning/company/decider';
import { spec } from '../../support/decider';

// SetRateLimit on the company stream: an operator's request limit per API key and minute (docs/rate-limits.md).

const profile = {
  companyId: 101, name: 'Clinica Norte', email: 'hola@clinicanorte.example', phone: '+541143210000', website: 'https://clinicanorte.example',
  address: 'Av. Cabildo 1234, CABA', description: 'Outpatient clinic', timezone: 'America/Argentina/Buenos_Aires', companySize: 'SMALL' as const,
  companyTypes: ['CLINIC' as const], categories: ['Health'],
};
const registered: CompanyEvent = { type: 'CompanyRegistered', data: profile };
const setTo = (perMinute: number | null) => ({ type: 'SetRateLimit' as const, data: { companyId: 101, perMinute } });
const limitSet = (perMinute: number | null): CompanyEvent => ({ type: 'CompanyRateLimitSet', data: { companyId: 101, perMinute } });

describe('company decider: SetRateLimit', () => {
  it('sets the limit of a registered company', () => {
    spec(companyDecider).given([registered]).when(setTo(600)).then([limitSet(600)]);
  });

  it('changes a limit that was set', () => {
    spec(companyDecider).given([registered, limitSet(600)]).when(setTo(6000)).then([limitSet(6000)]);
  });

  it('returns the company to the default with null', () => {
    spec(companyDecider).given([registered, limitSet(600)]).when(setTo(null)).then([limitSet(null)]);
  });

  it('records nothing when the limit already is the one asked for', () => {
    spec(companyDecider).given([registered, limitSet(600)]).when(setTo(600)).then([]);
    spec(companyDecider).given([registered]).when(setTo(null)).then([]);
    spec(companyDecider).given([registered, limitSet(600), limitSet(null)]).when(setTo(null)).then([]);
  });

  it('refuses an unknown company', () => {
    spec(companyDecider).given([]).when(setTo(600)).thenThrows('UNKNOWN_COMPANY');
  });

  it('refuses a limit that is not a whole number from 1 to the maximum', () => {
    for (const bad of [0, -5, 1.5, Number.NaN, MAX_RATE_LIMIT_PER_MINUTE + 1]) {
      spec(companyDecider).given([registered]).when(setTo(bad)).thenThrows('INVALID_RATE_LIMIT');
    }
    spec(companyDecider).given([registered]).when(setTo(MAX_RATE_LIMIT_PER_MINUTE)).then([limitSet(MAX_RATE_LIMIT_PER_MINUTE)]);
  });

  it('keeps the limit through provisioning', () => {
    const provisioned = companyDecider.evolve(companyDecider.evolve(companyDecider.initialState(), registered), limitSet(600));
    expect(provisioned.rateLimitPerMinute).toBe(600);
  });
});
