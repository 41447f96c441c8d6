import { type Decider, DomainError } from '../../decider';
import type { EventOf } from '../../../events/define';
import type { PhoneNumberEvent, PhoneNumberRegistered, TemplateRegistered } from '../../../events/provisioning';
import { deepEqual } from '../equal';

// Aggregate: a messaging phone number and its templates. Stream `phonenumber-{id}`. Provisioned from a desired
// state; only differences are emitted. Tier, quality rating and template status have their own events (they
// change on their own at the provider); the *Changed events carry the full state at that point.

export const phoneNumberStreamId = (numberId: number): string => `phonenumber-${numberId}`;

export type { PhoneNumberEvent };

export type PhoneNumberData = EventOf<typeof PhoneNumberRegistered>['data'];
export type TemplateData = EventOf<typeof TemplateRegistered>['data'];

export type PhoneNumberCommand = {
  type: 'ProvisionPhoneNumber';
  data: { number: PhoneNumberData; templates: TemplateData[] };
};

export interface PhoneNumberState {
  number: PhoneNumberData | null;
  templates: ReadonlyMap<number, TemplateData>;
}

const initialState = (): PhoneNumberState => ({ number: null, templates: new Map() });

function evolve(state: PhoneNumberState, event: PhoneNumberEvent): PhoneNumberState {
  switch (event.type) {
    case 'PhoneNumberRegistered':
    case 'PhoneNumberDetailsChanged':
      return { ...state, number: event.data };
    case 'MessagingTierChanged':
      return state.number ? { ...state, number: { ...state.number, messagingLimitTier: event.data.tier } } : state;
    case 'QualityRatingChanged':
      return state.number ? { ...state, number: { ...state.number, qualityRating: event.data.rating } } : state;
    case 'TemplateRegistered':
    case 'TemplateChanged':
      return { ...state, templates: new Map(state.templates).set(event.data.templateId, event.data) };
    case 'TemplateStatusChanged': {
      const t = state.templates.get(event.data.templateId);
      return t ? { ...state, templates: new Map(state.templates).set(t.templateId, { ...t, status: event.data.status }) } : state;
    }
    default:
      return state;
  }
}

function decide(command: PhoneNumberCommand, state: PhoneNumberState): PhoneNumberEvent[] {
  switch (command.type) {
    case 'ProvisionPhoneNumber': {
      const { number, templates } = command.data;
      const { companyId, numberId } = number;
      const stray = templates.find((t) => t.numberId !== numberId || t.companyId !== companyId);
      if (stray) throw new DomainError('NUMBER_MISMATCH', `template ${stray.templateId} was given to number ${numberId} but names number ${stray.numberId}`);

      const events: PhoneNumberEvent[] = [];
      const current = state.number;
      if (current === null) {
        events.push({ type: 'PhoneNumberRegistered', data: number });
      } else {
        if (current.companyId !== companyId) {
          throw new DomainError('NUMBER_OF_ANOTHER_COMPANY', `phone number ${numberId} belongs to company ${current.companyId}, not ${companyId}`);
        }
        const details = { ...number, messagingLimitTier: current.messagingLimitTier, qualityRating: current.qualityRating };
        if (!deepEqual(current, details)) events.push({ type: 'PhoneNumberDetailsChanged', data: details });
        if (current.messagingLimitTier !== number.messagingLimitTier) {
          events.push({ type: 'MessagingTierChanged', data: { companyId, numberId, tier: number.messagingLimitTier } });
        }
        if (current.qualityRating !== number.qualityRating) {
          events.push({ type: 'QualityRatingChanged', data: { companyId, numberId, rating: number.qualityRating } });
        }
      }
      for (const t of templates) {
        const now = state.templates.get(t.templateId);
        if (now === undefined) {
          events.push({ type: 'TemplateRegistered', data: t });
          continue;
        }
        const content = { ...t, status: now.status };
        if (!deepEqual(now, content)) events.push({ type: 'TemplateChanged', data: content });
        if (now.status !== t.status) {
          events.push({ type: 'TemplateStatusChanged', data: { companyId, numberId, templateId: t.templateId, status: t.status } });
        }
      }
      return events;
    }
    default: {
      const never: never = command.type;
      throw new DomainError('UNKNOWN_COMMAND', `unknown command ${String(never)}`);
    }
  }
}

export const phoneNumberDecider: Decider<PhoneNumberCommand, PhoneNumberEvent, PhoneNumberState> = { decide, evolve, initialState };
