import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import type { EventToAppend } from '../../src/ports/event-store';
import { BUILT_CLI, PROJECT_ROOT } from './e2e-server';

// `switchboard events export` as the replay suites run it (built CLI, a test database): its environment, one run read
// to its end, and the event the suites' writers append.

/** One NDJSON line of `events export`. */
export interface ExportedLine { position: string; stream: string; revision: string; type: string; data: any; metadata: any }

/** One `events export` run: its exit status, its lines, its stderr and the position it said to resume from. */
export interface ExportRun { status: number | null; lines: ExportedLine[]; stderr: string; resume: string | undefined }

/**
 * The one-shot CLI's environment against `databaseUrl` (only that: nothing inherited), its data dir under `dir`.
 * PORT=0: a one-shot command binds no port; 0 (any free port) is a valid value that reserves none.
 */
export function eventsCliEnv(databaseUrl: string, dir: string, secrets: { ANONYMIZATION_SECRET: string; API_KEY_PEPPER: string }): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: databaseUrl, ...secrets, DATA_DIR: join(dir, 'data'), PORT: '0' };
}

/** Runs `switchboard events export <args>` to its end (from the project's folder). */
export function runEventsExport(env: NodeJS.ProcessEnv, args: string[]): Promise<ExportRun> {
  return new Promise((ok) => {
    const child = spawn(process.execPath, [BUILT_CLI, 'events', 'export', ...args], { cwd: PROJECT_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('close', (status) => {
      const resume = /resume with --from '([^']*)'/.exec(stderr)?.[1];
      ok({ status, stderr, resume, lines: out.split('\n').filter(Boolean).map((l) => JSON.parse(l) as ExportedLine) });
    });
  });
}

/** An `OperatorRegistered` event of `companyId` (operator `n`), with fresh ids: what the replay suites' writers append. */
export const operatorRegistered = (companyId: number, n: number): EventToAppend => ({
  type: 'OperatorRegistered',
  data: { companyId, operatorId: n, name: `op ${n}` },
  metadata: { eventId: randomUUID(), correlationId: randomUUID(), causationId: null, companyId, actor: 'cli', at: new Date().toISOString(), schemaVersion: 1 },
});

/** A whole `events export` run under a heap limit, counted as it streams (its lines are not kept: they may be GBs). */
export interface HeapLimitedExport { status: number | null; signal: string | null; lines: number; bytes: number; positions: string[]; stderr: string }

/** Runs `switchboard events export` with `--max-old-space-size=<heapMb>`: the memory suites' check (no timing). */
export function exportWithHeapLimit(env: NodeJS.ProcessEnv, heapMb: number): Promise<HeapLimitedExport> {
  return new Promise((ok) => {
    const child = spawn(process.execPath, [`--max-old-space-size=${heapMb}`, BUILT_CLI, 'events', 'export'], { cwd: PROJECT_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let lines = 0;
    let bytes = 0;
    let tail = '';
    const positions: string[] = [];
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      bytes += c.length;
      const parts = (tail + c.toString('latin1')).split('\n');
      tail = parts.pop()!;
      for (const p of parts) {
        lines++;
        positions.push(/^\{"position":"([^"]+)"/.exec(p)?.[1] ?? '?');
      }
    });
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('close', (status, signal) => ok({ status, signal, lines, bytes, positions, stderr }));
  });
}
