import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../../src/config';

// (This file avoids naming the message broker: a jest run whose files mention it starts a JVM broker.)
// Every environment variable src/config.ts reads has a row in the README's configuration table, and every row names
// a variable the service reads (docs/install.md, README "Configuration"). Review 22 (docs against code).

const ROOT = join(__dirname, '../..');
const text = (file: string): string => readFileSync(join(ROOT, file), 'utf8');

/** The variables of config.ts's schema: the keys of its `z.object({ ... })`, one per line. */
function settingsInConfig(): string[] {
  const source = text('src/config.ts');
  const start = source.indexOf('const configSchema = z');
  const end = source.indexOf('.superRefine(', start);
  expect(start).toBeGreaterThan(-1);
  expect(end).toBeGreaterThan(start);
  return [...source.slice(start, end).matchAll(/^\s+([A-Z][A-Z0-9_]+):/gm)].map((m) => m[1] as string);
}

/** The variables named in the first column of the README's table under "## Configuration". */
function settingsInReadme(): string[] {
  const readme = text('README.md');
  const section = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('\n## ', readme.indexOf('## Configuration') + 1));
  const rows = section.split('\n').filter((line) => line.startsWith('| `'));
  return rows.flatMap((row) => [...(row.split('|')[1] ?? '').matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1] as string));
}

/** Read by Node or by libpq's conventions in src/adapters/postgres/pool.ts, not by config.ts: documented all the same. */
const OUTSIDE_CONFIG = ['NODE_EXTRA_CA_CERTS', 'PGOPTIONS'];

describe('review22 docs: the README names every setting', () => {
  const inConfig = settingsInConfig();
  const inReadme = settingsInReadme();

  it('finds the schema (a sanity check of the parse: the settings every deployment sets)', () => {
    expect(inConfig).toEqual(expect.arrayContaining(['PORT', 'DATABASE_URL', 'EVENTSTORE_URL', 'WEBHOOKS_PROXY_URL']));
    expect(inConfig.length).toBeGreaterThanOrEqual(30);
  });

  it('every variable of src/config.ts has a row in the README', () => {
    expect(inConfig.filter((name) => !inReadme.includes(name))).toEqual([]);
  });

  it('every row of the README names a variable the service reads', () => {
    expect(inReadme.filter((name) => !inConfig.includes(name) && !OUTSIDE_CONFIG.includes(name))).toEqual([]);
  });

  it('the variables read outside config.ts are read where the README says', () => {
    expect(text('src/adapters/postgres/pool.ts')).toContain('process.env.PGOPTIONS');
    // NODE_EXTRA_CA_CERTS is Node's own: nothing of ours reads it
  });

  it('an invalid value of a documented number names the variable and its range on one line', () => {
    expect(() => loadConfig({ STARTUP_WAIT_S: '0x10' })).toThrow(
      'invalid configuration: STARTUP_WAIT_S: a whole number from 1 to 3600, in decimal digits',
    );
    expect(() => loadConfig({ WORKER_OPS_PORT: '0' })).toThrow(
      'invalid configuration: WORKER_OPS_PORT: a port number from 1 to 65535 (unset: no listener)',
    );
  });
});
