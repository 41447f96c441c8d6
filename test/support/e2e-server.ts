import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';

// What end-to-end tests need to start a `switchboard` process: the built CLI, its environment and a free port.

/** The project's folder and its built CLI (`npm run build`; `npm test` builds first). */
export const PROJECT_ROOT = resolve(__dirname, '../..');
export const BUILT_CLI = join(PROJECT_ROOT, 'dist/cli.js');
/** A line of a printed stack trace. */
export const STACK_LINE = /^\s+at /m;

/** `describe` when the CLI is built, else `describe.skip` with the reason printed. */
export function describeWithBuiltCli(suite: string): jest.Describe {
  if (existsSync(BUILT_CLI)) return describe;
  console.warn(`${suite} skipped: ${BUILT_CLI} is missing (run \`npm run build\`; \`npm test\` builds first)`);
  return describe.skip;
}

/** The environment against a test database: only what the test passes (nothing inherited), fixed secrets. */
export function e2eServerEnv(options: { dataDir: string; port: string; databaseUrl: string; logLevel: string }, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    LOG_LEVEL: options.logLevel,
    DATA_DIR: options.dataDir,
    PORT: options.port,
    DATABASE_URL: options.databaseUrl,
    ANONYMIZATION_SECRET: 'e2e-anonymization-secret-0123456789',
    API_KEY_PEPPER: 'e2e-pepper-0123456789abcdef',
    ...extra,
  };
}

/** A loopback port free right now (the process the test starts binds it next). */
export const freePort = (): Promise<number> =>
  new Promise<number>((ok) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => ok(port));
    });
  });
