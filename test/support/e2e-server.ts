// The environment of a `switchboard` process an end-to-end test starts against a test database: only what the
// test passes (no inherited configuration), fixed secrets, the given log level and data folder.
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
