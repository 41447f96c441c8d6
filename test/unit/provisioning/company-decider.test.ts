import { DomainError } from '../../../src/commands/decider';
import { type CompanyEvent, companyDecider, type DesiredCompany } from '../../../src/commands/provisioning/company/decider';
import { spec } from '../../support/decider';

const profile = {
  companyId: 101, name: 'Clinica Norte', email: 'hola@clinicanorte.example', phone: '+541143210000', website: 'https://clinicanorte.example',
  address: 'Av. Cabildo 1234, CABA', description: 'Outpatient clinic', timezone: 'America/Argentina/Buenos_Aires', companySize: 'SMALL' as const,
  companyTypes: ['CLINIC' as const], categories: ['Health'],
};
const user = { companyId: 101, userId: 7, email: 'ops@clinicanorte.example', firstName: 'Ana', lastName: 'Paz' };
const list = { companyId: 101, listId: 11, name: 'Patients', isDefault: true };
const leads = { companyId: 101, listId: 12, name: 'Leads', isDefault: false };
const field = { companyId: 101, listId: 11, fieldId: 501, key: 'plan', name: 'Plan', fieldType: 'selector' as const, options: ['basic', 'gold'], required: false, group: null };
const branch = { companyId: 101, branchId: 1, name: 'Sede Centro', branchType: 'PHYSICAL' as const, address: 'Florida 100', phone: '+541143210001' };
const weekdays = { id: 1, days: ['MONDAY' as const, 'FRIDAY' as const], startTime: '09:00:00', finishAt: '18:00:00', isActive: true, description: 'Weekdays', specificDate: null };
const holiday = {
  companyId: 101, holidayId: 31, name: 'Navidad', description: 'Closed', date: '2026-12-25', branches: [], attentionTarget: 'ALL' as const,
  hasCustomHours: false, startTime: null, finishAt: null, isActive: true,
};
const agent = { companyId: 101, agentId: 3, name: 'Sofia', version: '2.1.0' };
const operator = { companyId: 101, operatorId: 44, name: 'Marta' };

const desired = (over: Partial<DesiredCompany> = {}): DesiredCompany => ({
  profile, users: [user], contactLists: [list, leads], customFields: [field], branches: [{ branch, schedules: [weekdays] }],
  holidays: [holiday], agents: [agent], operators: [operator], ...over,
});
const provision = (over: Partial<DesiredCompany> = {}) => ({ type: 'ProvisionCompany' as const, data: desired(over) });

const everything: CompanyEvent[] = [
  { type: 'CompanyRegistered', data: profile },
  { type: 'UserRegistered', data: user },
  { type: 'ContactListCreated', data: list },
  { type: 'ContactListCreated', data: leads },
  { type: 'CustomFieldDefined', data: field },
  { type: 'BranchConfigured', data: branch },
  { type: 'BranchScheduleSet', data: { companyId: 101, branchId: 1, schedules: [weekdays] } },
  { type: 'HolidayDeclared', data: holiday },
  { type: 'AgentRegistered', data: agent },
  { type: 'OperatorRegistered', data: operator },
];

describe('company decider: ProvisionCompany', () => {
  it('given nothing, registers the company and everything it has', () => {
    spec(companyDecider).given([]).when(provision()).then(everything);
  });

  it('given the same state, decides nothing (idempotent)', () => {
    spec(companyDecider).given(everything).when(provision()).then([]);
  });

  it('a branch without schedules gets no BranchScheduleSet', () => {
    spec(companyDecider).given(everything)
      .when(provision({ branches: [{ branch, schedules: [weekdays] }, { branch: { ...branch, branchId: 2, name: 'Online', branchType: 'ONLINE' }, schedules: [] }] }))
      .then([{ type: 'BranchConfigured', data: { ...branch, branchId: 2, name: 'Online', branchType: 'ONLINE' } }]);
  });

  it('emits only the differences, each *Changed with the full new state', () => {
    const changed = desired({
      profile: { ...profile, companySize: 'MEDIUM' },
      users: [{ ...user, lastName: 'Paz Ruiz' }],
      branches: [{ branch, schedules: [{ ...weekdays, finishAt: '19:00:00' }] }],
      holidays: [holiday, { ...holiday, holidayId: 33, name: 'Año Nuevo', date: '2027-01-01' }],
      agents: [{ ...agent, version: '2.2.0' }],
      operators: [operator, { companyId: 101, operatorId: 45, name: 'Luis' }],
    });
    spec(companyDecider).given(everything).when({ type: 'ProvisionCompany', data: changed }).then([
      { type: 'CompanyProfileChanged', data: { ...profile, companySize: 'MEDIUM' } },
      { type: 'UserChanged', data: { ...user, lastName: 'Paz Ruiz' } },
      { type: 'BranchScheduleSet', data: { companyId: 101, branchId: 1, schedules: [{ ...weekdays, finishAt: '19:00:00' }] } },
      { type: 'HolidayDeclared', data: { ...holiday, holidayId: 33, name: 'Año Nuevo', date: '2027-01-01' } },
      { type: 'AgentChanged', data: { ...agent, version: '2.2.0' } },
      { type: 'OperatorRegistered', data: { companyId: 101, operatorId: 45, name: 'Luis' } },
    ]);
  });

  it('changed branch details and list and field definitions', () => {
    spec(companyDecider).given(everything)
      .when(provision({
        branches: [{ branch: { ...branch, phone: '+541100000000' }, schedules: [weekdays] }],
        contactLists: [{ ...list, name: 'Pacientes' }, leads],
        customFields: [{ ...field, options: ['basic', 'gold', 'platinum'] }],
        holidays: [{ ...holiday, isActive: false }],
        agents: [agent],
        operators: [{ ...operator, name: 'Marta G.' }],
      }))
      .then([
        { type: 'ContactListChanged', data: { ...list, name: 'Pacientes' } },
        { type: 'CustomFieldChanged', data: { ...field, options: ['basic', 'gold', 'platinum'] } },
        { type: 'BranchConfigured', data: { ...branch, phone: '+541100000000' } },
        { type: 'HolidayChanged', data: { ...holiday, isActive: false } },
        { type: 'OperatorChanged', data: { ...operator, name: 'Marta G.' } },
      ]);
  });

  it('absent entities are not deleted: an empty desired state changes nothing', () => {
    spec(companyDecider).given(everything)
      .when(provision({ users: [], contactLists: [], customFields: [], branches: [], holidays: [], agents: [], operators: [] }))
      .then([]);
  });

  it('moving the default list emits both list changes', () => {
    spec(companyDecider).given(everything)
      .when(provision({ contactLists: [{ ...list, isDefault: false }, { ...leads, isDefault: true }] }))
      .then([
        { type: 'ContactListChanged', data: { ...list, isDefault: false } },
        { type: 'ContactListChanged', data: { ...leads, isDefault: true } },
      ]);
  });

  it('rejects a second default list, counting lists kept from before', () => {
    spec(companyDecider).given(everything)
      .when(provision({ contactLists: [{ companyId: 101, listId: 13, name: 'VIP', isDefault: true }], customFields: [] }))
      .thenThrows('MULTIPLE_DEFAULT_LISTS');
  });

  it('rejects a custom field of an unknown list', () => {
    spec(companyDecider).given([]).when(provision({ customFields: [{ ...field, listId: 99 }] })).thenThrows('UNKNOWN_CONTACT_LIST');
  });

  it('rejects an entity of another company', () => {
    spec(companyDecider).given([]).when(provision({ agents: [{ ...agent, companyId: 202 }] })).thenThrows('COMPANY_MISMATCH');
  });

  it('is pure: deciding does not change the given state', () => {
    const state = everything.reduce(companyDecider.evolve, companyDecider.initialState());
    const copy = JSON.stringify([...state.holidays.entries()]);
    companyDecider.decide(provision({ holidays: [{ ...holiday, name: 'X' }] }), state);
    expect(JSON.stringify([...state.holidays.entries()])).toBe(copy);
    expect(() => companyDecider.decide(provision({ customFields: [{ ...field, listId: 99 }] }), state)).toThrow(DomainError);
  });
});
