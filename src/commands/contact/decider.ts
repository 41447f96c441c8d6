import type { ContactEvent, ContactPhoneEvent, ContactProfile, ContactSource } from '../../events/contacts';
import { type Decider, DomainError } from '../decider';
import {
  activeValue,
  canonicalValue,
  type ContactListInfo,
  type FieldDef,
  type FieldScalar,
  type FieldVersion,
  sameValue,
} from './model';
import type { CustomFieldInput, ProfilePatch } from './upsert-input';

// ---------------------------------------------------------------------------------------------------------------
// The contact aggregate: stream contact-{companyId}-{contactId}.

export type { ContactProfile };

export type ContactState =
  | { exists: false }
  | {
      exists: true;
      companyId: number;
      contactId: number;
      contactListId: number;
      phone: string;
      profile: ContactProfile;
      createdAt: string;
      /** latest version per custom-field id */
      fields: ReadonlyMap<number, FieldVersion>;
    };

export type ExistingContact = Extract<ContactState, { exists: true }>;

/**
 * Create the contact (empty stream) or merge into it. Everything the decision validates against comes in:
 * the id to create with, the list (the requested or default one on create, the contact's own on update; null
 * when it does not exist), the clock.
 */
export interface UpsertContact {
  type: 'UpsertContact';
  companyId: number;
  contactId: number;
  /** canonical E.164 */
  phone: string;
  /** contact_list_id as given in the request (undefined: not given) */
  requestedListId?: number;
  list: ContactListInfo | null;
  profile: ProfilePatch;
  customFields: CustomFieldInput[];
  /** ISO 8601: the decision's clock (expiry checks, createdAt of a new contact) */
  now: string;
  /**
   * 'api': the public upsert (grouped fields rejected, an expiry must be in the future, unchanged = same as the
   * *active* value). 'seed': the provisioning fixture (grouped fields and past expiries allowed, unchanged = same
   * as the latest version, so re-seeding appends nothing).
   */
  mode: 'api' | 'seed';
  /** seed only: the fixture's flag and creation time */
  isTest?: boolean;
  createdAt?: string;
}

export type ContactCommand = UpsertContact;

export const initialContactState = (): ContactState => ({ exists: false });

export function evolveContact(state: ContactState, event: ContactEvent): ContactState {
  switch (event.type) {
    case 'ContactCreated': {
      const d = event.data;
      return {
        exists: true,
        companyId: d.companyId,
        contactId: d.contactId,
        contactListId: d.contactListId,
        phone: d.phone,
        profile: {
          fullName: d.fullName, email: d.email, source: d.source, sourceDetail: d.sourceDetail,
          profilePicture: d.profilePicture, isTest: d.isTest,
        },
        createdAt: d.createdAt,
        fields: new Map(),
      };
    }
    case 'ContactProfileChanged': {
      if (!state.exists) return state;
      const d = event.data;
      return {
        ...state,
        profile: {
          fullName: d.fullName, email: d.email, source: d.source, sourceDetail: d.sourceDetail,
          profilePicture: d.profilePicture, isTest: d.isTest,
        },
      };
    }
    case 'CustomFieldValueSet': {
      if (!state.exists) return state;
      const fields = new Map(state.fields);
      fields.set(event.data.fieldId, {
        version: event.data.version,
        value: event.data.value as FieldScalar[],
        expiresAt: event.data.expiresAt,
      });
      return { ...state, fields };
    }
    case 'CustomFieldValueCleared': {
      if (!state.exists) return state;
      const fields = new Map(state.fields);
      fields.set(event.data.fieldId, { version: event.data.version, value: null, expiresAt: null });
      return { ...state, fields };
    }
  }
}

export function decideContact(command: ContactCommand, state: ContactState): ContactEvent[] {
  switch (command.type) {
    case 'UpsertContact':
      return state.exists ? decideUpdate(command, state) : decideCreate(command);
  }
}

function decideCreate(cmd: UpsertContact): ContactEvent[] {
  if (!cmd.list) {
    if (cmd.requestedListId !== undefined) {
      throw new DomainError('unknown_contact_list', `contact_list_id ${cmd.requestedListId} does not exist in this company`);
    }
    throw new DomainError('no_default_list', 'contact_list_id is required: the company has no default contact list');
  }
  const p = cmd.profile;
  const created: ContactEvent = {
    type: 'ContactCreated',
    data: {
      companyId: cmd.companyId,
      contactId: cmd.contactId,
      contactListId: cmd.list.id,
      phone: cmd.phone,
      fullName: p.fullName ?? null,
      email: p.email ?? null,
      source: p.source === undefined ? 'api' : p.source,
      sourceDetail: p.sourceDetail ?? null,
      profilePicture: p.profilePicture ?? null,
      isTest: cmd.isTest ?? false,
      createdAt: cmd.createdAt ?? cmd.now,
    },
  };
  return [created, ...fieldEvents(cmd, cmd.list, new Map())];
}

function decideUpdate(cmd: UpsertContact, state: ExistingContact): ContactEvent[] {
  if (cmd.requestedListId !== undefined && cmd.requestedListId !== state.contactListId) {
    throw new DomainError(
      'contact_list_change',
      `contact_list_id cannot change for an existing contact: contact ${state.contactId} belongs to list ${state.contactListId} (got ${cmd.requestedListId})`,
    );
  }
  const events: ContactEvent[] = [];
  const before = state.profile;
  const after: ContactProfile = {
    fullName: cmd.profile.fullName !== undefined ? cmd.profile.fullName : before.fullName,
    email: cmd.profile.email !== undefined ? cmd.profile.email : before.email,
    source: cmd.profile.source !== undefined ? cmd.profile.source : before.source,
    sourceDetail: cmd.profile.sourceDetail !== undefined ? cmd.profile.sourceDetail : before.sourceDetail,
    profilePicture: cmd.profile.profilePicture !== undefined ? cmd.profile.profilePicture : before.profilePicture,
    isTest: cmd.isTest ?? before.isTest,
  };
  const fieldChanges = fieldEvents(cmd, cmd.list ?? { id: state.contactListId, name: '', isDefault: false, fields: [] }, state.fields);
  const changed = (Object.keys(after) as (keyof ContactProfile)[]).some((k) => after[k] !== before[k]);
  if (changed) {
    events.push({ type: 'ContactProfileChanged', data: { companyId: state.companyId, contactId: state.contactId, ...after } });
  }
  return [...events, ...fieldChanges];
}

/** Validates every custom-field item (all problems at once) and returns a version event per change. */
function fieldEvents(cmd: UpsertContact, list: ContactListInfo, current: ReadonlyMap<number, FieldVersion>): ContactEvent[] {
  const problems: string[] = [];
  const seen = new Map<number, number>();
  const events: ContactEvent[] = [];
  const now = new Date(cmd.now);
  for (const item of cmd.customFields) {
    const at = `custom_fields[${item.index}]`;
    const def: FieldDef | undefined =
      item.customFieldId !== undefined
        ? list.fields.find((f) => f.id === item.customFieldId)
        : list.fields.find((f) => f.key === item.key);
    if (!def) {
      const which = item.customFieldId !== undefined ? `custom_field_id ${item.customFieldId}` : `key ${JSON.stringify(item.key)}`;
      problems.push(`${at}: no custom field with ${which} in contact list ${list.id}`);
      continue;
    }
    const label = `${at} (${JSON.stringify(def.key)})`;
    const first = seen.get(def.id);
    if (first !== undefined) {
      problems.push(`${label}: custom field ${def.id} appears more than once (also custom_fields[${first}])`);
      continue;
    }
    seen.set(def.id, item.index);
    if (def.group !== null && cmd.mode === 'api') {
      problems.push(`${label}: fields of the repeatable group ${JSON.stringify(def.group)} cannot be set through this API`);
      continue;
    }
    const latest = current.get(def.id);
    const base = cmd.mode === 'api' ? activeValue(latest, now) : latest && latest.value !== null ? { value: latest.value, expiresAt: latest.expiresAt } : null;
    const version = (latest?.version ?? 0) + 1;
    if (item.value.length === 0) {
      if (base !== null) {
        events.push({ type: 'CustomFieldValueCleared', data: { companyId: cmd.companyId, contactId: cmd.contactId, fieldId: def.id, key: def.key, version } });
      }
      continue;
    }
    const parsed = canonicalValue(def, item.value);
    if (!parsed.ok) {
      problems.push(`${label}: ${parsed.error}`);
      continue;
    }
    if (cmd.mode === 'api' && typeof item.expiresAt === 'string' && Date.parse(item.expiresAt) <= now.getTime()) {
      problems.push(`${at}.expires_at must be in the future (got ${item.expiresAt})`);
      continue;
    }
    const expiresAt = item.expiresAt === undefined ? (base?.expiresAt ?? null) : item.expiresAt;
    if (base !== null && sameValue(base.value, parsed.value) && base.expiresAt === expiresAt) continue;
    events.push({
      type: 'CustomFieldValueSet',
      data: { companyId: cmd.companyId, contactId: cmd.contactId, fieldId: def.id, key: def.key, version, value: parsed.value, expiresAt },
    });
  }
  if (problems.length > 0) throw new DomainError('invalid_custom_fields', problems.join('; '));
  return events;
}

export const contactDecider: Decider<ContactCommand, ContactEvent, ContactState> = {
  decide: decideContact,
  evolve: evolveContact,
  initialState: initialContactState,
};

/** The custom fields that got a new version in these events (the upsert's `versionedCustomFields`). */
export const versionedFields = (events: readonly ContactEvent[]): Array<{ customFieldId: number; key: string; version: number }> =>
  events.flatMap((e) =>
    e.type === 'CustomFieldValueSet' || e.type === 'CustomFieldValueCleared'
      ? [{ customFieldId: e.data.fieldId, key: e.data.key, version: e.data.version }]
      : [],
  );

// ---------------------------------------------------------------------------------------------------------------
// The phone claim: stream contactphone-{companyId}-{e164}. Which contacts of the company hold this number.

export interface PhoneClaim {
  contactId: number;
  isTest: boolean;
}
export interface PhoneClaimState {
  claims: PhoneClaim[];
}

export interface ClaimPhone {
  type: 'ClaimPhone';
  companyId: number;
  phone: string;
  contactId: number;
  isTest: boolean;
  /** 'api': only a number no visible (non-test) contact holds can be claimed; 'seed': fixture contacts may share one */
  mode: 'api' | 'seed';
}

export const phoneClaimDecider: Decider<ClaimPhone, ContactPhoneEvent, PhoneClaimState> = {
  initialState: () => ({ claims: [] }),
  evolve: (state, event) =>
    state.claims.some((c) => c.contactId === event.data.contactId)
      ? state
      : { claims: [...state.claims, { contactId: event.data.contactId, isTest: event.data.isTest }] },
  decide: (cmd, state) => {
    if (state.claims.some((c) => c.contactId === cmd.contactId)) return [];
    const holders = state.claims.filter((c) => !c.isTest);
    if (cmd.mode === 'api' && holders.length > 0) {
      throw new DomainError('phone_taken', `${cmd.phone} already belongs to contact ${holders.map((c) => c.contactId).join(', ')}`);
    }
    return [{ type: 'ContactPhoneClaimed', data: { companyId: cmd.companyId, phone: cmd.phone, contactId: cmd.contactId, isTest: cmd.isTest } }];
  },
};

/** The contacts an API caller sees for a number (test contacts are invisible to the external endpoints). */
export const visibleHolders = (state: PhoneClaimState): number[] => state.claims.filter((c) => !c.isTest).map((c) => c.contactId);

export const contactStreamId = (companyId: number, contactId: number): string => `contact-${companyId}-${contactId}`;
export const contactPhoneStreamId = (companyId: number, e164: string): string => `contactphone-${companyId}-${e164}`;
