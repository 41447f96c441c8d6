import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

// The embedded Postgres of a DATA_DIR as a process, for tests that start and signal `switchboard` processes.

/** Its postmaster's pid, from its pid file (as root the cluster may live outside DATA_DIR: the state file says). */
export function postmasterPidOf(dataDir: string): number | undefined {
  const state = JSON.parse(readFileSync(join(dataDir, 'embedded-postgres.json'), 'utf8')) as { databaseDir?: string };
  const pidFile = join(state.databaseDir ?? join(dataDir, 'pg'), 'postmaster.pid');
  return existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8').split('\n')[0]) : undefined;
}

export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Postgres takes a moment to stop after its SIGINT: whether it has within `waitMs` (a server left running: false). */
export async function untilStopped(pid: number, waitMs = 20_000): Promise<boolean> {
  for (const deadline = Date.now() + waitMs; isRunning(pid) && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 50));
  return !isRunning(pid);
}
