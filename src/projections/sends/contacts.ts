import type { Pool } from 'pg';
import { findContactsByPhone, findContactsByPhones } from '../contacts/queries';

export interface RecipientContact {
  id: number;
  fullName: string | null;
}

/**
 * The company's contact whose phone matches `e164` under the phone variants (the recipient of a send, the author
 * of an inbound message), from the contacts read model. Several matches: the oldest non-test contact wins (a test
 * contact only when no other matches); none: null.
 */
export async function findContactForRecipient(pool: Pool, companyId: number, e164: string): Promise<RecipientContact | null> {
  return chooseRecipient(await findContactsByPhone(pool, companyId, e164));
}

function chooseRecipient(found: ReadonlyArray<{ id: number; fullName: string | null; isTest: boolean }>): RecipientContact | null {
  const chosen = found.find((c) => !c.isTest) ?? found[0];
  return chosen ? { id: chosen.id, fullName: chosen.fullName } : null;
}

/** findContactForRecipient for many recipients in one query; keyed `${companyId}:${e164}` (no entry: no contact). */
export async function findContactsForRecipients(
  pool: Pool,
  recipients: ReadonlyArray<{ companyId: number; e164: string }>,
): Promise<Map<string, RecipientContact>> {
  const chosen = new Map<string, RecipientContact>();
  for (const [key, found] of await findContactsByPhones(pool, recipients)) {
    const c = chooseRecipient(found);
    if (c) chosen.set(key, c);
  }
  return chosen;
}
