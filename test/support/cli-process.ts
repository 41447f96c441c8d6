import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { BUILT_CLI } from './e2e-server';

// The built CLI as a process of the test: a command run to its end, or one started, waited on, signalled and stopped.

/** Runs `switchboard <args>` to its end: its stdout; throws with its stderr unless it exits 0. */
export function runCli(env: NodeJS.ProcessEnv, args: string[], options: { maxBuffer?: number } = {}): string {
  const r = spawnSync(process.execPath, [BUILT_CLI, ...args], { env, encoding: 'utf8', ...options });
  if (r.status !== 0) throw new Error(`switchboard ${args.join(' ')} exited with ${r.status}: ${r.stderr}`);
  return r.stdout;
}

export interface CliExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface CliProcess {
  readonly child: ChildProcess;
  /** How it exited (listened for from its start). */
  readonly exited: Promise<CliExit>;
  /** stdout and stderr as they arrived. */
  output(): string;
  stdout(): string;
  stderr(): string;
  /** Checks `done` every 50 ms, `tries` times at most: whether it came true; throws if the process exits first. */
  until(what: string, done: () => boolean, tries?: number): Promise<boolean>;
  /** `until` its output includes `text`. */
  untilOutput(text: string, tries?: number): Promise<boolean>;
  /** Sends `signal`: the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  /** SIGKILL unless it has exited, then its exit (for the tear-down). */
  kill(): Promise<void>;
}

/** Starts `switchboard <args>` with `env` (only that: nothing inherited), its output piped to the test. */
export function startCli(args: string[], env: NodeJS.ProcessEnv, options: { cwd?: string } = {}): CliProcess {
  const child = spawn(process.execPath, [BUILT_CLI, ...args], { ...options, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (x) => {
    output += x;
    stdout += x;
  });
  child.stderr!.on('data', (x) => {
    output += x;
    stderr += x;
  });
  const exited = new Promise<CliExit>((ok) => child.once('exit', (code, signal) => ok({ code, signal })));

  const until = async (what: string, done: () => boolean, tries = 1200) => {
    for (let i = 0; i < tries; i++) {
      if (done()) return true;
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${args[0]} exited before ${what}: ${output}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    return false;
  };
  return {
    child,
    exited,
    output: () => output,
    stdout: () => stdout,
    stderr: () => stderr,
    until,
    untilOutput: (text, tries) => until(text, () => output.includes(text), tries),
    stop: async (signal = 'SIGTERM') => {
      child.kill(signal);
      return (await exited).code;
    },
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** The line `serve` prints once it listens, with its URL. */
export const SERVE_LISTENING_LINE = /^switchboard listening on (http:\/\/\S+) \(ready in /m;

/**
 * Starts `switchboard serve` (or `args`) on PORT=0, the system picking a free port as the server binds it, and waits
 * for the URL it prints once it listens. It replaces a port taken by `freePort()` and handed to the child, which
 * another process could bind in between (a port-reuse race). Throws (the process killed) if no URL is printed.
 */
export async function startServeOnAnyPort(
  env: NodeJS.ProcessEnv, args: string[] = ['serve'], options: { cwd?: string; tries?: number } = {},
): Promise<{ serve: CliProcess; url: string }> {
  const serve = startCli(args, { ...env, PORT: '0' }, { cwd: options.cwd });
  try {
    const printed = await serve.until('it printed its URL', () => SERVE_LISTENING_LINE.test(serve.stdout()), options.tries);
    if (!printed) throw new Error(`${args.join(' ')} printed no URL: ${serve.output()}`);
  } catch (err) {
    await serve.kill();
    throw err;
  }
  return { serve, url: SERVE_LISTENING_LINE.exec(serve.stdout())![1] };
}
