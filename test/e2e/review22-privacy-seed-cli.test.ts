import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUILT_CLI, describeWithBuiltCli, PROJECT_ROOT, STACK_LINE } from '../support/e2e-server';

// Review 22 (docs/provisioning.md): `switchboard seed FILE` with a file that is not JSON printed JSON.parse's message,
// which in Node 20 quotes the text around the fault: a fixture's phone numbers and names in a terminal or CI log.
// The line names the fault and the file, not the text (read before any Postgres is started).

const d = describeWithBuiltCli('review 22 seed CLI privacy');

d('review 22: seed FILE that is not JSON does not print its text', () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchboard-review22-seed-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it.each([
    ['a stray comma after a contact', '{"companies":[{"contacts":[{"fullName":"Juan Perez","phone":"+5491155551234"},,]}]}', "Unexpected token ','"],
    ['a stray letter before the document', 'x{"companies":[{"contacts":[{"phone":"+5491155551234"}]}]}', "Unexpected token 'x'"],
  ])('%s', (_name, text, fault) => {
    const path = join(dir, 'broken.json');
    writeFileSync(path, text);
    const r = spawnSync(process.execPath, [BUILT_CLI, 'seed', path], {
      cwd: PROJECT_ROOT, env: { PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: join(dir, 'data') }, encoding: 'utf8', timeout: 60_000,
    });
    expect(r.status).toBe(1);
    expect(r.stderr).not.toMatch(STACK_LINE);
    expect(r.stderr.trim()).toBe(
      `switchboard: ${path} is not JSON (${fault}); a fixture is one JSON document (format: ../shared/contracts/fixture.md; example: ../shared/contracts/example-fixture.json)`,
    );
    for (const part of ['5551234', 'Perez', 'phone']) expect(r.stderr).not.toContain(part);
  });
});
