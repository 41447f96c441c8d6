import { FixtureContactsError } from '../../src/commands/contact/fixture';
import { FixtureError } from '../../src/commands/provisioning/fixture';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { failWith } from '../../src/cli/failure';
import { createTestContext, type TestContext } from '../support/services';
import { countEvents, exampleFixture } from '../support/provisioning';

// Review 22 (docs/provisioning.md, "Errors"): `switchboard seed` prints its errors to an operator's terminal or a CI
// log, and they held the customers' phone numbers: a fixture contact's invalid phone as written
// (`"+54 9 11 5555-12" is not a valid phone number`) and, when a contact's phone differs from the stored one, the
// stored number (`contact 9001 has the number +5491155551234`). The entry is named by its path; the number is not.

/** What `switchboard seed` prints on stderr for `err` (src/cli/seed.ts hands it to failWith). */
function printed(err: unknown): string {
  const writes: string[] = [];
  const write = process.stderr.write;
  process.stderr.write = ((chunk: string) => { writes.push(String(chunk)); return true; }) as typeof process.stderr.write;
  try {
    failWith('switchboard', err);
  } catch {
    // CliFailure: the command exits 1
  } finally {
    process.stderr.write = write;
  }
  return writes.join('');
}

const contact = (id: number, phone: string) => ({
  id, contactListId: 11, fullName: 'Juan Perez', phone, email: null, source: 'manual', sourceDetail: null,
  profilePicture: null, isTest: false, createdAt: '2026-01-10T12:00:00Z', customFields: [],
});

describe('review 22: seed errors do not print customers phone numbers', () => {
  let t: TestContext;
  beforeAll(async () => {
    t = await createTestContext({ now: () => new Date('2026-03-01T10:00:00.000Z') });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('an invalid phone is named by its path and shape, not its digits; nothing appended', async () => {
    const doc = exampleFixture();
    doc.companies[0].contacts = [contact(9101, '+5491155550101'), contact(9102, '+54 9 11 5555-12'), contact(9103, '011 15 5555-98')];
    const before = await countEvents(t.db.pool);
    const err = await seedFixture(t.services, doc, { actor: 'test' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FixtureError);
    expect((err as FixtureError).issues).toEqual([
      { path: 'companies[0].contacts[1].phone', message: 'is not a valid phone number (16 characters, 11 digits)' },
      { path: 'companies[0].contacts[2].phone', message: 'is not a valid phone number (14 characters, 11 digits)' },
    ]);
    expect(await countEvents(t.db.pool)).toBe(before);
    const out = printed(err);
    expect(out).toBe(
      'switchboard: invalid fixture (2 problems):\n'
        + '  companies[0].contacts[1].phone: is not a valid phone number (16 characters, 11 digits)\n'
        + '  companies[0].contacts[2].phone: is not a valid phone number (14 characters, 11 digits)\n'
        + 'nothing was appended\n',
    );
    for (const part of ['5555-12', '5555-98', '91155550101']) expect(out).not.toContain(part);
  });

  it("a contact whose phone differs from the stored one: the stored number is not printed, nor the fixture's", async () => {
    const doc = exampleFixture();
    doc.companies[0].contacts = [contact(9201, '+54 9 11 5555-2201')];
    await seedFixture(t.services, doc, { actor: 'test' });
    doc.companies[0].contacts = [contact(9201, '+54 9 11 5555-2202')];
    const err = await seedFixture(t.services, doc, { actor: 'test' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FixtureContactsError);
    expect((err as FixtureContactsError).problems).toEqual([
      { path: 'contacts[0].phone', message: "contact 9201 has the number [phone]; a contact's phone cannot change" },
    ]);
    const out = printed(err);
    expect(out).toBe(`switchboard: contacts of company 101 rejected:\n  contacts[0].phone: contact 9201 has the number [phone]; a contact's phone cannot change\n`);
  });
});
