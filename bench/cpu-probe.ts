import { readdirSync, readFileSync } from 'node:fs';

// CPU seconds used so far, from /proc (Linux; zeros elsewhere): a bench takes two snapshots around a round and
// divides by the round's operations to get the CPU each operation cost, server, Postgres and load generator apart.

export interface CpuSnapshot {
  /** the process `serverPid` (the forked server) */
  server: number;
  /**
   * the embedded Postgres the server started (its postmaster and every child: backends, autovacuum, the WAL
   * writer...); with DATABASE_URL, every process named postgres on this machine
   */
  postgres: number;
  /** this process */
  self: number;
}

const CLOCK_TICKS_PER_S = 100;

function processCpu(pid: string): { comm: string; ppid: string; seconds: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // after "pid (comm) ": state, ppid, ... utime and stime (fields 14 and 15 of the whole line)
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { comm: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')), ppid: fields[1], seconds: (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_S };
  } catch {
    return undefined; // gone meanwhile, or no /proc
  }
}

export function cpuSnapshot(serverPid: number): CpuSnapshot {
  let postgres = 0;
  let pids: string[] = [];
  try {
    pids = readdirSync('/proc').filter((p) => /^\d+$/.test(p));
  } catch {
    // no /proc: postgres stays 0
  }
  const all = new Map(pids.map((pid) => [pid, processCpu(pid)]));
  const postmasters = new Set([...all].filter(([, p]) => p?.comm === 'postgres' && p.ppid === String(serverPid)).map(([pid]) => pid));
  for (const [pid, p] of all) {
    if (p?.comm !== 'postgres') continue;
    if (postmasters.size === 0 || postmasters.has(pid) || postmasters.has(p.ppid)) postgres += p.seconds;
  }
  const own = process.cpuUsage();
  return { server: processCpu(String(serverPid))?.seconds ?? 0, postgres, self: (own.user + own.system) / 1e6 };
}
