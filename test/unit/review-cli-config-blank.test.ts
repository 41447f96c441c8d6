import { loadConfig } from '../../src/config';

// Found in review: `DATA_DIR=` (empty) put the embedded cluster, secrets.json and embedded-postgres.json in the
// working folder, and an empty number read as 0 ("Too small"). A variable set to nothing is unset: its default.

describe('config: a variable set to nothing is its default', () => {
  it('DATA_DIR, HOST and the numbers, enums and strings with a default', () => {
    const blank = loadConfig({
      DATA_DIR: '', HOST: '', PORT: ' ', RATE_LIMIT_PER_MINUTE: '', EXPORT_MAX_CONCURRENT: ' ', STARTUP_WAIT_S: '', LOG_LEVEL: '',
      PROVIDER: '', EVENT_STORE: '', RATE_LIMIT_ENABLED: '', PROVIDER_BASE_URL: '', API_KEY_PREFIX: '', WEBHOOKS_RETENTION_DAYS: '',
    });
    expect(blank).toEqual(loadConfig({}));
    expect(blank.dataDir).toBe('./.switchboard');
  });

  it('a value that is not blank is still checked', () => {
    expect(() => loadConfig({ RATE_LIMIT_PER_MINUTE: '0' })).toThrow('RATE_LIMIT_PER_MINUTE: a whole number from 1 to 1000000000, in decimal digits');
    expect(loadConfig({ DATA_DIR: ' /srv/sb' }).dataDir).toBe(' /srv/sb');
  });
});
