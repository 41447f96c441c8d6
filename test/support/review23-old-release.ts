import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PROJECT_ROOT } from './e2e-server';

// An older release built from git for the upgrade checks of review 23 (docs/upgrades.md): `git archive <commit> | tar`
// into a temporary folder, the project's node_modules linked (the lockfile must be the same: checked), then its own
// `tsc -p tsconfig.build.json` and asset copy. REVIEW23_OLD_TREE names a tree built that way to reuse.

/** Why the release cannot be built here (a shallow clone without it, another lockfile), or undefined. */
export function oldReleaseUnavailable(commit: string): string | undefined {
  const given = process.env.REVIEW23_OLD_TREE;
  if (given && existsSync(join(given, 'dist/cli.js'))) return undefined;
  const git = (...args: string[]) => spawnSync('git', ['-C', PROJECT_ROOT, ...args], { encoding: 'utf8' });
  if (git('cat-file', '-e', `${commit}^{commit}`).status !== 0) return `commit ${commit} is not in this clone (shallow?)`;
  const lock = git('diff', '--quiet', commit, 'HEAD', '--', 'package-lock.json');
  if (lock.status !== 0) return `package-lock.json differs from ${commit}'s: its node_modules cannot be shared`;
  return undefined;
}

/** The built tree of `commit` (its dist/cli.js), and whether the caller removes it. */
export function buildOldRelease(commit: string): { dir: string; owned: boolean } {
  const given = process.env.REVIEW23_OLD_TREE;
  if (given && existsSync(join(given, 'dist/cli.js'))) return { dir: given, owned: false };
  const dir = mkdtempSync(join(tmpdir(), 'review23-old-'));
  const sh = (cmd: string) => {
    const r = spawnSync('sh', ['-c', cmd], { cwd: dir, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`${cmd}: ${r.stderr}${r.stdout}`);
  };
  sh(`git -C ${PROJECT_ROOT} archive ${commit} | tar -x -C ${dir}`);
  symlinkSync(join(PROJECT_ROOT, 'node_modules'), join(dir, 'node_modules'));
  sh('npx tsc -p tsconfig.build.json && node scripts/copy-assets.mjs');
  return { dir, owned: true };
}
