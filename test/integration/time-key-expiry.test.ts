import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { runCli } from '../support/cli-process';
import { describeWithBuiltCli, e2eServerEnv } from '../support/e2e-server';
import { exampleFixture } from '../support/provisioning';
import { createTestContext, type TestContext } from '../support/services';

// Time review (2026-11-28, docs/business.md "Time and time zones"): `keys issue --expires` was read with Date.parse,
// which takes a date-time without a zone in the process's own time zone (and accepts V8's loose formats): the same
// command made a key expire at another instant on a host in another zone. It is now read as the export reads its
// instants: a date-time without a zone, or a bare date, is UTC. The built CLI runs in Asia/Kathmandu (UTC+05:45), its
// Postgres session in America/St_Johns (UTC−03:30); jest's own process.env.TZ cannot move this process's zone.

describeWithBuiltCli('time: keys issue --expires')('keys issue --expires is the same instant in every process time zone', () => {
  let t: TestContext;
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  beforeAll(async () => {
    t = await createTestContext();
    await seedFixture(t.services, exampleFixture(), { actor: 'test' });
    dataDir = mkdtempSync(join(tmpdir(), 'sb-time-keys-'));
    env = e2eServerEnv({ dataDir, port: '0', databaseUrl: t.db.url, logLevel: 'warn' }, { TZ: 'Asia/Kathmandu', PGOPTIONS: '-c TimeZone=America/St_Johns' });
  });
  afterAll(async () => {
    await t?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  const expiryOf = (name: string): unknown => runCli(env, ['keys', 'list', '--company', '101', '--json']).trim().split('\n')
    .map((line) => JSON.parse(line) as { name: string; expiresAt: string | null }).find((k) => k.name === name)?.expiresAt;

  it('a date-time without a zone and a bare date are UTC; an offset counts; refusals name the value', () => {
    // the child's zone is Kathmandu's
    const local = spawnSync(process.execPath, ['-e', 'process.stdout.write(new Date(2026, 0, 1).toISOString())'], { env, encoding: 'utf8' });
    expect(local.stdout).toBe('2025-12-31T18:15:00.000Z');

    const cases: Array<[string, string]> = [
      ['2099-01-01T00:00:00', '2099-01-01T00:00:00.000Z'],
      ['2099-01-01', '2099-01-01T00:00:00.000Z'],
      ['2099-01-01T05:45:00.123456+05:45', '2099-01-01T00:00:00.123Z'],
    ];
    for (const [expires, stored] of cases) {
      runCli(env, ['keys', 'issue', '--company', '101', '--name', `exp ${expires}`, '--expires', expires]);
      expect([expires, expiryOf(`exp ${expires}`)]).toEqual([expires, stored]);
    }

    expect(() => runCli(env, ['keys', 'issue', '--company', '101', '--name', 'loose', '--expires', '2099-01-01 10:30 PM']))
      .toThrow('--expires must be an ISO 8601 date-time, got "2099-01-01 10:30 PM"');
    expect(expiryOf('loose')).toBeUndefined();
  });
});
