import { randomUUID } from 'node:crypto';
import type { PoolClient } from 'pg';
import { CliFailure, failWith } from '../../src/cli/failure';
import { seedFixtureContacts } from '../../src/commands/contact/fixture';
import { awaitReadModels, readModelsUpToDate, ReadModelsBehindError } from '../../src/commands/provisioning/read-models';
import { seedFixture } from '../../src/commands/provisioning/seed';
import type { Position } from '../../src/ports/event-store';
import { createTestContext, type TestContext } from '../support/services';
import { exampleFixture } from '../support/provisioning';

// A writing transaction left open anywhere on the cluster holds the event log back (docs/core.md): the provisioning
// commands' read-model waits give up at their deadline and say why, instead of hanging.

describe('read-model waits while a transaction holds the event log back', () => {
  let t: TestContext;
  let holder: PoolClient | undefined;

  beforeAll(async () => {
    t = await createTestContext({ runner: false }); // as the CLI: no runner loop, the waits catch up themselves
    await seedFixture(t.services, exampleFixture(), { actor: 'test' });
  });
  afterEach(async () => {
    jest.restoreAllMocks();
    await holder?.query('ROLLBACK');
    holder?.release();
    holder = undefined;
  });
  afterAll(async () => {
    await t?.close();
  });

  /** Opens a transaction that has a transaction id (as any write would), and leaves it open; its backend's pid. */
  async function holdTransactionOpen(): Promise<number> {
    holder = await t.db.pool.connect();
    await holder.query('BEGIN');
    await holder.query('SELECT pg_current_xact_id()');
    return (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
  }

  async function revokeSomeKey(): Promise<Position> {
    const id = randomUUID();
    const metadata = { eventId: id, correlationId: id, causationId: null, companyId: null, actor: 'test', at: new Date().toISOString() };
    return (await t.services.store.append(`apikey-${id}`, [{ type: 'ApiKeyRevoked', data: { keyId: id }, metadata }], 'no_stream')).position;
  }

  /**
   * The error names the oldest writing transaction of the cluster: this test's held one, unless another test file
   * (the test databases share one cluster) holds an older one at that moment; either way a pid and its database.
   */
  const naming = (pid: number) => expect.objectContaining({
    name: 'ReadModelsBehindError',
    message: expect.stringMatching(new RegExp(`a transaction open for \\d+ s \\(pid (${pid}|\\d+), database [^)]+\\) holds the event log back; end it .*pg_terminate_backend\\(\\d+\\)`)),
  });

  it('awaitReadModels gives up at its deadline, naming the transaction and the fix; the CLI prints it as one line', async () => {
    const pid = await holdTransactionOpen();
    const position = await revokeSomeKey();

    const err = await awaitReadModels(t.services, position, ['ApiKeyRevoked'], 300).catch((e: unknown) => e);
    expect(err).toEqual(naming(pid));
    expect((err as Error).message).toMatch(/^read models apikeys did not reach \S+ within 300 ms: a transaction open for \d+ s .*holds the event log back; end it \(.*pg_terminate_backend\(\d+\)\), then run the command again$/);

    const printed: string[] = [];
    jest.spyOn(process.stderr, 'write').mockImplementation((text) => printed.push(String(text)) > 0);
    expect(() => failWith('keys', err)).toThrow(CliFailure);
    expect(printed.join('')).toBe(`keys: ${(err as Error).message}\n`);
  });

  it('readModelsUpToDate gives up at its deadline too', async () => {
    const pid = await holdTransactionOpen();
    await revokeSomeKey();

    await expect(readModelsUpToDate(t.services, ['accounts'], 300)).rejects.toEqual(naming(pid));
  });

  it("the seed's wait for its contacts gives up at its deadline too", async () => {
    const pid = await holdTransactionOpen();
    // The wait's deadline is 30 s away: its clock jumps past it once it has started, rather than the test waiting.
    const clock = Date.now.bind(Date);
    let ahead = 0;
    jest.spyOn(Date, 'now').mockImplementation(() => clock() + ahead);
    const catchUp = t.services.runner.catchUp.bind(t.services.runner);
    jest.spyOn(t.services.runner, 'catchUp').mockImplementation((deadline) => {
      ahead = 31_000;
      return catchUp(deadline);
    });

    const contact = {
      contactListId: 11, fullName: null, phone: '+5491155550077', email: null, source: 'manual', sourceDetail: null,
      profilePicture: null, isTest: false, createdAt: '2026-01-10T12:00:00Z', customFields: [],
    };
    const seeding = seedFixtureContacts(t.services, 101, [contact], { actor: 'test', correlationId: randomUUID() });
    await expect(seeding).rejects.toBeInstanceOf(ReadModelsBehindError);
    await expect(seeding).rejects.toEqual(naming(pid));
    await expect(seeding).rejects.toThrow(/did not reach the seeded contacts in time: a transaction open for/);
  });
});
