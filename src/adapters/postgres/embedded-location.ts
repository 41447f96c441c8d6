// Where the embedded cluster lives. Postgres refuses to run as root, so as root it runs as the `postgres` OS user,
// who must be able to reach both the cluster's folder and the Postgres binaries. A project or DATA_DIR under a
// private folder (a 0700 home such as /root) is out of that user's reach; the service then keeps the cluster, and
// if need be a copy of the binaries, under a root-owned system folder the user can reach, instead of loosening the
// permissions of folders the user did not hand to it. See docs/install.md, "Running as root".
import { createHash } from 'node:crypto';
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, readFileSync, realpathSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, parse } from 'node:path';

/** The root-owned folder that holds relocated clusters and binaries (only used when running as root). */
export const SYSTEM_EMBEDDED_DIR = '/var/lib/switchboard/embedded';

export interface OsUser {
  uid: number;
  gid: number;
}

export interface ClusterPlacement {
  /** the cluster's data folder (initdb's --pgdata) */
  databaseDir: string;
  /** the folder holding bin/, lib/, share/ of the Postgres build to run */
  nativeDir: string;
  /** why the cluster or the binaries are not where they would be for a non-root user; undefined when they are */
  relocation?: string;
}

export const isRoot = (): boolean => process.getuid?.() === 0;

/** The `postgres` OS user, created (as embedded-postgres does) when missing. Root only. */
export function postgresOsUser(): OsUser {
  const id = (flag: string) => execFileSync('id', [flag, 'postgres'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  try {
    id('-u');
  } catch {
    execFileSync('groupadd', ['-f', 'postgres'], { stdio: 'ignore' });
    execFileSync('useradd', ['-g', 'postgres', 'postgres'], { stdio: 'ignore' });
  }
  return { uid: Number(id('-u')), gid: Number(id('-g')) };
}

/**
 * Whether `user` can reach `path` (search a folder, execute a file), asked the way Postgres will meet it: a process
 * spawned with that uid/gid (node drops the supplementary groups), so modes, ACLs and every ancestor all count.
 */
export function reachableBy(user: OsUser, path: string): boolean {
  return spawnSync('test', ['-x', path], { uid: user.uid, gid: user.gid, stdio: 'ignore' }).status === 0;
}

/** The cluster folder of a DATA_DIR the postgres user cannot reach: the same on every start for the same DATA_DIR. */
export function systemClusterDir(dataDirRealPath: string): string {
  return join(SYSTEM_EMBEDDED_DIR, 'clusters', createHash('sha256').update(dataDirRealPath).digest('hex').slice(0, 16), 'pg');
}

/**
 * Decides where the cluster and the binaries are for this DATA_DIR. Not root: `<DATA_DIR>/pg` and the package's
 * binaries, as always. Root: the same when the postgres user can reach them; otherwise the cluster goes to
 * `systemClusterDir(DATA_DIR)` (or where `recordedDir`, from embedded-postgres.json, says an earlier start put it)
 * and the binaries are copied once per version to `SYSTEM_EMBEDDED_DIR/<platform>-<version>`.
 */
export function placeCluster(dataDir: string, packagedNativeDir: string, user: OsUser | undefined, recordedDir?: string): ClusterPlacement {
  const root = realpathSync(dataDir);
  const inDataDir = join(root, 'pg');
  if (!user) return { databaseDir: inDataDir, nativeDir: packagedNativeDir };
  const reasons: string[] = [];
  let databaseDir = inDataDir;
  if (recordedDir && recordedDir !== inDataDir && existsSync(join(recordedDir, 'PG_VERSION'))) {
    databaseDir = recordedDir;
    reasons.push(`an earlier start placed the cluster there, as ${join(root, 'embedded-postgres.json')} records`);
  } else if (!reachableBy(user, root)) {
    if (existsSync(join(inDataDir, 'PG_VERSION'))) {
      throw new Error(`the embedded Postgres cluster in ${inDataDir} is out of the postgres OS user's reach (a folder above it is private): `
        + 'move DATA_DIR to a folder that user can traverse, or set DATABASE_URL to a Postgres of your own');
    }
    databaseDir = systemClusterDir(root);
    reasons.push(`the postgres OS user, which runs Postgres for root, cannot reach ${root}`);
  }
  let nativeDir = packagedNativeDir;
  if (!reachableBy(user, join(packagedNativeDir, 'bin', 'postgres'))) {
    nativeDir = copiedBinaries(packagedNativeDir);
    reasons.push(`the postgres OS user cannot reach the Postgres binaries in ${packagedNativeDir}, so it runs a copy of them from ${nativeDir}`);
  }
  if (databaseDir !== inDataDir) {
    mkdirOpen(dirname(databaseDir));
    if (!reachableBy(user, dirname(databaseDir))) throw unreachableSystemDir(dirname(databaseDir));
  }
  if (nativeDir !== packagedNativeDir && !reachableBy(user, join(nativeDir, 'bin', 'postgres'))) throw unreachableSystemDir(nativeDir);
  return { databaseDir, nativeDir, relocation: reasons.length ? reasons.join('; ') : undefined };
}

const unreachableSystemDir = (folder: string) =>
  new Error(`the postgres OS user cannot reach ${folder}: make ${SYSTEM_EMBEDDED_DIR} and its parents searchable by that user `
    + '(mode 0755), or set DATABASE_URL to a Postgres of your own');

/** Creates the missing folders of `folder` as 0755 whatever the umask; folders that already exist are left alone. */
function mkdirOpen(folder: string): void {
  if (existsSync(folder)) return;
  mkdirOpen(dirname(folder));
  mkdirSync(folder);
  chmodSync(folder, 0o755);
}

/** A copy of the package's native folder under SYSTEM_EMBEDDED_DIR, made once per version (atomically). */
function copiedBinaries(packagedNativeDir: string): string {
  const pkg = JSON.parse(readFileSync(join(packagedNativeDir, '..', 'package.json'), 'utf8')) as { name: string; version: string };
  const target = join(SYSTEM_EMBEDDED_DIR, `${parse(pkg.name).base}-${pkg.version}`);
  const complete = join(target, '.complete');
  if (existsSync(complete)) return target;
  mkdirOpen(SYSTEM_EMBEDDED_DIR);
  const staging = `${target}.${process.pid}.tmp`;
  rmSync(staging, { recursive: true, force: true });
  cpSync(packagedNativeDir, staging, { recursive: true, verbatimSymlinks: true });
  chmodSync(staging, 0o755);
  writeFileSync(join(staging, '.complete'), `${pkg.name}@${pkg.version}\n`, { mode: 0o644 });
  try {
    renameSync(staging, target);
  } catch (err) {
    rmSync(staging, { recursive: true, force: true });
    if (!existsSync(complete)) throw err; // not a concurrent start that copied them first
  }
  return target;
}
