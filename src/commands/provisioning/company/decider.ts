import { type Decider, DomainError } from '../../decider';
import type { CompanyEvent } from '../../../events/provisioning';
import { deepEqual } from '../equal';

// Aggregate: a company and what hangs off it (users, branches and schedules, holidays, agents, operators,
// contact lists and their custom fields). Stream `company-{id}`. Provisioned from a desired state: `decide`
// compares it with the folded state and emits only the differences. Entities absent from the desired state are
// kept (provisioning never deletes).

export const companyStreamId = (companyId: number): string => `company-${companyId}`;

export type { CompanyEvent };

type DataOf<T extends CompanyEvent['type']> = Extract<CompanyEvent, { type: T }>['data'];
export type CompanyProfile = DataOf<'CompanyRegistered'>;
export type UserData = DataOf<'UserRegistered'>;
export type BranchData = DataOf<'BranchConfigured'>;
export type ScheduleData = DataOf<'BranchScheduleSet'>['schedules'][number];
export type HolidayData = DataOf<'HolidayDeclared'>;
export type AgentData = DataOf<'AgentRegistered'>;
export type OperatorData = DataOf<'OperatorRegistered'>;
export type ContactListData = DataOf<'ContactListCreated'>;
export type CustomFieldData = DataOf<'CustomFieldDefined'>;

/** The desired state of a company (event-shaped; built from a fixture by `from-fixture.ts`). */
export interface DesiredCompany {
  profile: CompanyProfile;
  users: UserData[];
  contactLists: ContactListData[];
  customFields: CustomFieldData[];
  branches: Array<{ branch: BranchData; schedules: ScheduleData[] }>;
  holidays: HolidayData[];
  agents: AgentData[];
  operators: OperatorData[];
}

/** The highest per-minute request limit an operator may set (a 32-bit column; far above any real traffic). */
export const MAX_RATE_LIMIT_PER_MINUTE = 1_000_000_000;

export type CompanyCommand =
  | { type: 'ProvisionCompany'; data: DesiredCompany }
  /** perMinute: requests per API key and minute; null: back to the service default (RATE_LIMIT_PER_MINUTE) */
  | { type: 'SetRateLimit'; data: { companyId: number; perMinute: number | null } };

export interface CompanyState {
  profile: CompanyProfile | null;
  users: ReadonlyMap<number, UserData>;
  lists: ReadonlyMap<number, ContactListData>;
  fields: ReadonlyMap<number, CustomFieldData>;
  branches: ReadonlyMap<number, BranchData>;
  schedules: ReadonlyMap<number, ScheduleData[]>;
  holidays: ReadonlyMap<number, HolidayData>;
  agents: ReadonlyMap<number, AgentData>;
  operators: ReadonlyMap<number, OperatorData>;
  rateLimitPerMinute: number | null;
}

const initialState = (): CompanyState => ({
  profile: null,
  users: new Map(), lists: new Map(), fields: new Map(), branches: new Map(), schedules: new Map(),
  holidays: new Map(), agents: new Map(), operators: new Map(), rateLimitPerMinute: null,
});

const put = <T>(map: ReadonlyMap<number, T>, id: number, value: T): ReadonlyMap<number, T> => new Map(map).set(id, value);

function evolve(state: CompanyState, event: CompanyEvent): CompanyState {
  switch (event.type) {
    case 'CompanyRegistered':
    case 'CompanyProfileChanged':
      return { ...state, profile: event.data };
    case 'UserRegistered':
    case 'UserChanged':
      return { ...state, users: put(state.users, event.data.userId, event.data) };
    case 'ContactListCreated':
    case 'ContactListChanged':
      return { ...state, lists: put(state.lists, event.data.listId, event.data) };
    case 'CustomFieldDefined':
    case 'CustomFieldChanged':
      return { ...state, fields: put(state.fields, event.data.fieldId, event.data) };
    case 'BranchConfigured':
      return { ...state, branches: put(state.branches, event.data.branchId, event.data) };
    case 'BranchScheduleSet':
      return { ...state, schedules: put(state.schedules, event.data.branchId, event.data.schedules) };
    case 'HolidayDeclared':
    case 'HolidayChanged':
      return { ...state, holidays: put(state.holidays, event.data.holidayId, event.data) };
    case 'AgentRegistered':
    case 'AgentChanged':
      return { ...state, agents: put(state.agents, event.data.agentId, event.data) };
    case 'OperatorRegistered':
    case 'OperatorChanged':
      return { ...state, operators: put(state.operators, event.data.operatorId, event.data) };
    case 'CompanyRateLimitSet':
      return { ...state, rateLimitPerMinute: event.data.perMinute };
    default:
      return state;
  }
}

/** Created/changed events for the entities of one kind whose desired data differs from the current one. */
function diff<T, C extends CompanyEvent['type'], U extends CompanyEvent['type']>(
  current: ReadonlyMap<number, T>,
  desired: readonly T[],
  idOf: (t: T) => number,
  created: C,
  changed: U,
): CompanyEvent[] {
  const out: CompanyEvent[] = [];
  for (const d of desired) {
    const now = current.get(idOf(d));
    if (now === undefined) out.push({ type: created, data: d } as CompanyEvent);
    else if (!deepEqual(now, d)) out.push({ type: changed, data: d } as CompanyEvent);
  }
  return out;
}

function decide(command: CompanyCommand, state: CompanyState): CompanyEvent[] {
  switch (command.type) {
    case 'ProvisionCompany': {
      const d = command.data;
      const companyId = d.profile.companyId;
      const wrong = [...d.users, ...d.contactLists, ...d.customFields, ...d.holidays, ...d.agents, ...d.operators, ...d.branches.map((b) => b.branch)]
        .find((e) => e.companyId !== companyId);
      if (wrong) throw new DomainError('COMPANY_MISMATCH', `an entity of company ${wrong.companyId} was given to company ${companyId}`);

      // One default list at most, counting the lists the desired state leaves out (provisioning never deletes).
      const lists = new Map(state.lists);
      for (const l of d.contactLists) lists.set(l.listId, l);
      const defaults = [...lists.values()].filter((l) => l.isDefault).map((l) => l.listId);
      if (defaults.length > 1) {
        throw new DomainError('MULTIPLE_DEFAULT_LISTS', `company ${companyId} would have ${defaults.length} default contact lists (${defaults.join(', ')}); at most one is allowed`);
      }
      for (const f of d.customFields) {
        if (!lists.has(f.listId)) throw new DomainError('UNKNOWN_CONTACT_LIST', `custom field ${f.fieldId} belongs to unknown contact list ${f.listId}`);
      }

      const events: CompanyEvent[] = [];
      if (state.profile === null) events.push({ type: 'CompanyRegistered', data: d.profile });
      else if (!deepEqual(state.profile, d.profile)) events.push({ type: 'CompanyProfileChanged', data: d.profile });
      events.push(...diff(state.users, d.users, (u) => u.userId, 'UserRegistered', 'UserChanged'));
      events.push(...diff(state.lists, d.contactLists, (l) => l.listId, 'ContactListCreated', 'ContactListChanged'));
      events.push(...diff(state.fields, d.customFields, (f) => f.fieldId, 'CustomFieldDefined', 'CustomFieldChanged'));
      for (const { branch, schedules } of d.branches) {
        const now = state.branches.get(branch.branchId);
        if (now === undefined || !deepEqual(now, branch)) events.push({ type: 'BranchConfigured', data: branch });
        const current = state.schedules.get(branch.branchId) ?? [];
        if (!deepEqual(current, schedules)) {
          events.push({ type: 'BranchScheduleSet', data: { companyId, branchId: branch.branchId, schedules } });
        }
      }
      events.push(...diff(state.holidays, d.holidays, (h) => h.holidayId, 'HolidayDeclared', 'HolidayChanged'));
      events.push(...diff(state.agents, d.agents, (a) => a.agentId, 'AgentRegistered', 'AgentChanged'));
      events.push(...diff(state.operators, d.operators, (o) => o.operatorId, 'OperatorRegistered', 'OperatorChanged'));
      return events;
    }
    case 'SetRateLimit': {
      const { companyId, perMinute } = command.data;
      if (state.profile === null) throw new DomainError('UNKNOWN_COMPANY', `no company ${companyId}`);
      if (perMinute !== null && !(Number.isInteger(perMinute) && perMinute >= 1 && perMinute <= MAX_RATE_LIMIT_PER_MINUTE)) {
        throw new DomainError('INVALID_RATE_LIMIT', `the limit must be a whole number of requests per minute from 1 to ${MAX_RATE_LIMIT_PER_MINUTE}, got ${perMinute}`);
      }
      if (perMinute === state.rateLimitPerMinute) return [];
      return [{ type: 'CompanyRateLimitSet', data: { companyId, perMinute } }];
    }
    default: {
      const never: never = command;
      throw new DomainError('UNKNOWN_COMMAND', `unknown command ${String((never as { type: unknown }).type)}`);
    }
  }
}

export const companyDecider: Decider<CompanyCommand, CompanyEvent, CompanyState> = { decide, evolve, initialState };
