import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadMigrations } from '../../src/adapters/postgres/migrations';

describe('loadMigrations', () => {
  it('reads the versioned SQL files in order, one per version', () => {
    const versions = loadMigrations().map((m) => m.version);
    expect(versions).toEqual(versions.map((_, i) => i + 1));
    expect(loadMigrations().at(-1)).toMatchObject({ version: 19, name: 'webhook_set_aside_retention' });
  });

  it('refuses two files of one version (a stale copy of a renamed migration), naming both', () => {
    const dir = mkdtempSync(join(tmpdir(), 'migrations-'));
    try {
      writeFileSync(join(dir, '0001_first.sql'), 'SELECT 1;');
      writeFileSync(join(dir, '0002_renamed.sql'), 'SELECT 2;');
      writeFileSync(join(dir, '0002_old_name.sql'), 'SELECT 2;');
      writeFileSync(join(dir, 'README.txt'), 'not a migration');
      expect(() => loadMigrations(dir)).toThrow(`two migrations have version 2 in ${dir} (0002_old_name.sql, 0002_renamed.sql): a stale build? Rebuild with npm run build`);
      rmSync(join(dir, '0002_old_name.sql'));
      expect(loadMigrations(dir).map((m) => `${m.version} ${m.name}`)).toEqual(['1 first', '2 renamed']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
