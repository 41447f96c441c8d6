import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUILT_CLI as CLI, describeWithBuiltCli, PROJECT_ROOT as ROOT } from '../support/e2e-server';

// A one-shot command's stdout is its result (`events export`'s NDJSON, `keys issue`'s key), so its log lines go to
// stderr (2026-11-28; before, pino wrote them to stdout, among the NDJSON: the migrations' waiting line did so in CI).

const d = describeWithBuiltCli('CLI one-shot log output suite');

d('one-shot commands log to stderr', () => {
  let dir = '';
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'switchboard-cli-logs-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('events export at LOG_LEVEL=info: stdout holds no log line, stderr holds them', () => {
    const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: join(dir, 'data'), LOG_LEVEL: 'info' };
    delete env.DATABASE_URL;
    const r = spawnSync(process.execPath, [CLI, 'events', 'export'], { cwd: ROOT, env, encoding: 'utf8', timeout: 120_000 });
    expect(r.status).toBe(0);
    // a fresh embedded database holds no event: the export's output is empty, and nothing else is on stdout
    expect(r.stdout).toBe('');
    const logLines = r.stderr.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { level?: number; msg?: string });
    expect(logLines.length).toBeGreaterThan(0);
    expect(logLines.every((l) => typeof l.level === 'number' && typeof l.msg === 'string')).toBe(true);
  });
});
