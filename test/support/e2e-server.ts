import { createServer } from 'node:net';

// What end-to-end tests need to start a `switchboard` process: its environment and a free port.

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
