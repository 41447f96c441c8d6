import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Pool } from 'pg';

// Provisioning fixtures for tests: the contract's example (copied into test/fixtures) and a second company.

export const EXAMPLE = {
  companyId: 101,
  key: 'sbk_cn7f3a9d2e4b6c8a0f1e3d5c7b9a2468',
  expiredKey: 'sbk_cnexpired000000000000000000000',
  globalKey: 'sbk_global_a1b2c3d4e5f60718293a4b5c6d7e8f90',
};

export const SECOND = {
  companyId: 202,
  key: 'sbk_fs0000111122223333444455556666',
};

/** The contract's example fixture (a fresh deep copy), with `contacts: []` unless asked to keep them. */
export function exampleFixture(options: { keepContacts?: boolean } = {}): any {
  const doc = JSON.parse(readFileSync(join(__dirname, '..', 'fixtures', 'example-fixture.json'), 'utf8'));
  if (!options.keepContacts) for (const c of doc.companies) c.contacts = [];
  return doc;
}

/** A second company, for isolation tests: ids disjoint from the example's. */
export function secondCompany(): any {
  return {
    id: SECOND.companyId,
    name: 'Ferreteria Sur',
    email: 'ventas@ferreteriasur.example',
    phone: '+541149990000',
    website: 'https://ferreteriasur.example',
    address: 'Av. Mitre 500, Avellaneda',
    description: 'Hardware store',
    timezone: 'America/Argentina/Buenos_Aires',
    companySize: 'MICRO',
    companyTypes: ['ECOMMERCE'],
    categories: ['Hardware'],
    users: [{ id: 8, email: 'dueno@ferreteriasur.example', first_name: 'Raul', last_name: 'Sosa' }],
    apiKeys: [{ name: 'Shop sync', key: SECOND.key, userId: 8, active: true, expiresAt: null }],
    contactLists: [{ id: 21, name: 'Clientes', isDefault: true, customFields: [] }],
    contacts: [],
    branches: [
      {
        id: 1, name: 'Local Avellaneda', branchType: 'PHYSICAL', address: 'Av. Mitre 500', phone: '+541149990001',
        schedules: [{ id: 1, days: ['SATURDAY', 'SUNDAY'], startTime: '09:00:00', finishAt: '13:00:00', isActive: true, description: 'Weekend', specificDate: null }],
      },
    ],
    holidays: [
      { id: 31, name: 'Dia del Trabajador', description: 'Closed', date: '2026-05-01', branches: [], attentionTarget: 'ALL', hasCustomHours: false, startTime: null, finishAt: null, isActive: true },
    ],
    agents: [],
    operators: [],
    phoneNumbers: [
      {
        id: 41, phoneNumberId: '109876543210002', displayPhoneNumber: '+54 9 11 4999-0000', verifiedName: 'Ferreteria Sur',
        businessName: 'Ferreteria Sur SRL', isPrimary: true, messagingLimitTier: 'TIER_UNLIMITED', qualityRating: 'YELLOW',
        templates: [
          { id: 951, name: 'stock_alert', language: 'es', category: 'MARKETING', status: 'APPROVED',
            variables: [{ name: 'product', type: 'TEXT', position: 1, isRequired: true, component: 'BODY' }], buttons: [] },
        ],
      },
    ],
  };
}

/** Example plus the second company. */
export function twoCompanyFixture(): any {
  const doc = exampleFixture();
  doc.companies.push(secondCompany());
  return doc;
}

export async function countEvents(pool: Pool): Promise<number> {
  const r = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM es.events');
  return r.rows[0].n;
}

export async function eventTypesAfter(pool: Pool, count: number): Promise<string[]> {
  const r = await pool.query<{ type: string }>('SELECT type FROM es.events ORDER BY tx_id, seq OFFSET $1', [count]);
  return r.rows.map((x) => x.type);
}
