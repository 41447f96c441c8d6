import { hashApiKey, keyIdFromHash } from '../../shared/api-key';
import type { ApiKeyCommand } from './api-key/decider';
import type { CompanyCommand } from './company/decider';
import type { FixtureCompany, FixtureCompanyKey, FixtureGlobalKey, FixturePhoneNumber } from './fixture';
import type { PhoneNumberCommand } from './phone-number/decider';

// Fixture entities (already validated) → the desired states the provisioning deciders compare with.

const iso = (t: string | null): string | null => (t === null ? null : new Date(t).toISOString());

export function companyCommand(c: FixtureCompany): CompanyCommand {
  const companyId = c.id;
  return {
    type: 'ProvisionCompany',
    data: {
      profile: {
        companyId, name: c.name, email: c.email, phone: c.phone, website: c.website, address: c.address,
        description: c.description, timezone: c.timezone, companySize: c.companySize,
        companyTypes: [...c.companyTypes], categories: [...c.categories],
      },
      users: c.users.map((u) => ({ companyId, userId: u.id, email: u.email, firstName: u.first_name, lastName: u.last_name })),
      contactLists: c.contactLists.map((l) => ({ companyId, listId: l.id, name: l.name, isDefault: l.isDefault })),
      customFields: c.contactLists.flatMap((l) =>
        l.customFields.map((f) => ({
          companyId, listId: l.id, fieldId: f.id, key: f.key, name: f.name, fieldType: f.fieldType,
          options: f.options === null ? null : [...f.options], required: f.required, group: f.group,
        })),
      ),
      branches: c.branches.map((b) => ({
        branch: { companyId, branchId: b.id, name: b.name, branchType: b.branchType, address: b.address, phone: b.phone },
        schedules: b.schedules.map((s) => ({
          id: s.id, days: [...s.days], startTime: s.startTime, finishAt: s.finishAt, isActive: s.isActive,
          description: s.description, specificDate: s.specificDate,
        })),
      })),
      holidays: c.holidays.map((h) => ({
        companyId, holidayId: h.id, name: h.name, description: h.description, date: h.date, branches: [...h.branches],
        attentionTarget: h.attentionTarget, hasCustomHours: h.hasCustomHours, startTime: h.startTime, finishAt: h.finishAt,
        isActive: h.isActive,
      })),
      agents: c.agents.map((a) => ({ companyId, agentId: a.id, name: a.name, version: a.version })),
      operators: c.operators.map((o) => ({ companyId, operatorId: o.id, name: o.name })),
    },
  };
}

export function phoneNumberCommand(companyId: number, n: FixturePhoneNumber): PhoneNumberCommand {
  const numberId = n.id;
  return {
    type: 'ProvisionPhoneNumber',
    data: {
      number: {
        companyId, numberId, phoneNumberId: n.phoneNumberId, displayPhoneNumber: n.displayPhoneNumber,
        verifiedName: n.verifiedName, businessName: n.businessName, isPrimary: n.isPrimary,
        messagingLimitTier: n.messagingLimitTier, qualityRating: n.qualityRating,
      },
      templates: n.templates.map((t) => ({
        companyId, numberId, templateId: t.id, name: t.name, language: t.language, category: t.category, status: t.status,
        variables: t.variables.map((v) => ({ name: v.name, type: v.type, position: v.position, isRequired: v.isRequired, component: v.component })),
        buttons: t.buttons.map((b) => ({
          type: b.type, text: b.text,
          ...(b.url !== undefined ? { url: b.url } : {}),
          ...(b.phoneNumber !== undefined ? { phoneNumber: b.phoneNumber } : {}),
        })),
      })),
    },
  };
}

export function apiKeyCommand(
  pepper: string,
  key: FixtureCompanyKey | FixtureGlobalKey,
  owner: { scope: 'company'; companyId: number } | { scope: 'global' },
): ApiKeyCommand & { type: 'ProvisionApiKey' } {
  const keyHash = hashApiKey(pepper, key.key);
  return {
    type: 'ProvisionApiKey',
    data: {
      keyId: keyIdFromHash(keyHash),
      scope: owner.scope,
      companyId: owner.scope === 'company' ? owner.companyId : null,
      userId: 'userId' in key ? key.userId : null,
      name: key.name,
      keyHash,
      expiresAt: iso(key.expiresAt),
      active: key.active,
    },
  };
}
