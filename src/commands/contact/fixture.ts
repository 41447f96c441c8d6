import type { Services } from '../../services';

/** A contact of the provisioning fixture (`../shared/contracts/fixture.md`), already validated by the seed. */
export interface FixtureContact {
  id?: number;
  contactListId: number;
  fullName: string | null;
  phone: string;
  email: string | null;
  source: string;
  sourceDetail: string | null;
  profilePicture: string | null;
  isTest: boolean;
  createdAt: string;
  customFields: Array<{ key: string; value: unknown[]; expiresAt: string | null }>;
}

export interface FixtureContactsResult {
  created: number;
  changed: number;
  unchanged: number;
}

/**
 * Creates or updates the fixture's contacts of one company (idempotent: a second identical seed appends nothing).
 * Owned by the contacts feature (issue 6).
 */
export async function seedFixtureContacts(
  _services: Services,
  _companyId: number,
  contacts: FixtureContact[],
  _ctx: { actor: string; correlationId: string },
): Promise<FixtureContactsResult> {
  if (contacts.length === 0) return { created: 0, changed: 0, unchanged: 0 };
  throw new Error('seeding fixture contacts is not implemented yet (contacts feature)');
}
