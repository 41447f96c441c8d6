import { randomUUID } from 'node:crypto';
import { PostgresEventStore } from '../../src/adapters/event-store/postgres';
import { CliUsageError, failWith } from '../../src/cli/failure';
import { cliFailureText, reportStartupFailure } from '../../src/cli/startup-errors';
import { DomainError } from '../../src/commands/decider';
import { contactPhoneStreamId } from '../../src/commands/contact/decider';
import { type EventToAppend, WrongExpectedRevisionError } from '../../src/ports/event-store';
import { createTestDatabase, type TestDatabase } from '../support/db';

// Review 23: an unexpected error of a one-shot command (`seed` meeting a stream conflict on a contact's phone claim,
// `contactphone-{company}-{e164}`) was printed with its message as it was, the customer's number in it. The CLI's
// failure lines now go through the log scrubber (`scrubLogLine`): `+` numbers and provider message ids masked, the
// line's form otherwise kept (docs/privacy.md).

const PHONE = '+5491155550001';
const DIGITS = '5491155550001';

const ev = (): EventToAppend => {
  const id = randomUUID();
  return { type: 'ContactPhoneClaimed', data: {}, metadata: { eventId: id, correlationId: id, causationId: null, companyId: 12, actor: 'test', at: '2026-11-28T00:00:00.000Z' } };
};

describe('review 23: CLI failure lines without customers\' numbers', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;
  let conflict: WrongExpectedRevisionError;

  beforeAll(async () => {
    db = await createTestDatabase();
    store = new PostgresEventStore(db.pool);
    // a real stream conflict: two writers both expecting the claim stream not to exist
    const stream = contactPhoneStreamId(12, PHONE);
    await store.append(stream, [ev()], 'no_stream');
    conflict = await store.append(stream, [ev()], 'no_stream').then(
      () => { throw new Error('the second append was expected to conflict'); },
      (err: unknown) => err as WrongExpectedRevisionError,
    );
  });
  afterAll(async () => {
    await store?.close();
    await db?.drop();
  });

  it('the conflict\'s own message names the number (what the CLI printed before)', () => {
    expect(conflict).toBeInstanceOf(WrongExpectedRevisionError);
    expect(conflict.message).toBe(`wrong expected revision on contactphone-12-${PHONE}: expected no_stream, actual 0`);
  });

  it('cliFailureText masks it and keeps the line\'s form: the message, then the stack', () => {
    const text = cliFailureText(conflict, false);
    const [first, ...stack] = text.split('\n');
    expect(first).toBe('switchboard: WrongExpectedRevisionError: wrong expected revision on contactphone-12-+[phone]: expected no_stream, actual 0');
    expect(stack.length).toBeGreaterThan(0);
    expect(stack.every((line) => line.startsWith('    at '))).toBe(true);
    expect(text).not.toContain(DIGITS);
  });

  it('with LOG_LEVEL=debug (the whole error after the line) too', () => {
    const text = cliFailureText(conflict, true);
    expect(text.split('\n')[0]).toBe('switchboard: WrongExpectedRevisionError: wrong expected revision on contactphone-12-+[phone]: expected no_stream, actual 0');
    expect(text).not.toContain(DIGITS);
  });

  it('a provider message id is shown by its reference; a usage error is masked too', () => {
    const wamid = 'wamid.HBgNNTQ5MTE1NTU1MDAwMRUCABIYFjNFQjBDMDQ3RDk5QjFEQTM2OTc0AA==';
    const text = cliFailureText(new Error(`status for ${wamid} not applied`), false);
    expect(text.split('\n')[0]).toMatch(/^switchboard: Error: status for wamid\.\[sha256:[0-9a-f]{12}\] not applied$/);
    expect(text).not.toContain('HBgN');
    expect(cliFailureText(new CliUsageError(`no contact has the number ${PHONE}`), false)).toBe('switchboard: no contact has the number +[phone]');
  });

  it('a failed start reported by serve and worker (reportStartupFailure) is masked, debug details included', () => {
    let written = '';
    reportStartupFailure(conflict, true, (t) => { written += t; });
    expect(written).toContain('contactphone-12-+[phone]');
    expect(written).not.toContain(DIGITS);
  });

  it('an expected failure printed by failWith (seed, demo, keys, companies) is masked', () => {
    const chunks: string[] = [];
    const spy = jest.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => { chunks.push(String(chunk)); return true; });
    try {
      expect(() => failWith('switchboard', new DomainError('CONTACT_CONFLICT', `the number ${PHONE} is held by contact 9201`))).toThrow();
    } finally {
      spy.mockRestore();
    }
    expect(chunks.join('')).toBe('switchboard: the number +[phone] is held by contact 9201\n');
  });
});
