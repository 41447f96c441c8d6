import { validateFixture } from '../../../src/commands/provisioning/fixture';
import { buildDemoFixture } from '../../../src/commands/provisioning/demo-fixture';
import { exampleFixture } from '../../support/provisioning';

describe('validateFixture', () => {
  it('accepts the contract example, contacts included', () => {
    const r = validateFixture(exampleFixture({ keepContacts: true }), 'sbk');
    expect(r.ok).toBe(true);
    if (r.ok) expect(r.fixture.companies[0].contacts[0]).toEqual({
      id: 9001, contactListId: 11, fullName: 'Juan Perez', phone: '011 15 5555-1234', email: 'juan@example.com', source: 'manual',
      sourceDetail: null, profilePicture: null, isTest: false, createdAt: '2026-01-10T12:00:00Z',
      customFields: [{ key: 'plan', value: ['gold'], expiresAt: null }],
    });
  });

  it('fills documented defaults (active true, expiresAt null, empty collections)', () => {
    const r = validateFixture({
      companies: [{ id: 5, name: 'Minimal', timezone: 'UTC', apiKeys: [{ name: 'k', key: 'sbk_0123456789' }] }],
    }, 'sbk');
    expect(r.ok).toBe(true);
    if (r.ok) {
      expect(r.fixture.globalKeys).toEqual([]);
      expect(r.fixture.companies[0]).toMatchObject({
        email: '', companySize: null, companyTypes: [], users: [], contactLists: [], contacts: [], branches: [], holidays: [],
        agents: [], operators: [], phoneNumbers: [], apiKeys: [{ name: 'k', key: 'sbk_0123456789', userId: null, active: true, expiresAt: null }],
      });
    }
  });

  it('uses the configured key prefix', () => {
    const r = validateFixture(exampleFixture(), 'acme');
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.issues.map((i) => i.path)).toEqual(['companies[0].apiKeys[0].key', 'companies[0].apiKeys[1].key', 'globalKeys[0].key']);
  });

  it('the demo fixture is valid', () => {
    const r = validateFixture(buildDemoFixture({ key: 'sbk_0123456789abcdef', now: new Date('2026-03-01T00:00:00Z') }), 'sbk');
    expect(r).toMatchObject({ ok: true });
  });
});
