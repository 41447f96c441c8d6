import { loadConfig } from '../../src/config';

// Found in review: numbers were read with Number(), so WEBHOOKS_MAX_ENDPOINTS_PER_COMPANY=0x10 was 16, 1e3 was 1000,
// +5 was 5 and 1.0 was 1: values an operator may read otherwise than the service. Now only decimal digits.

const NUMERIC: Array<[name: string, expected: string, valid: string, read: (c: ReturnType<typeof loadConfig>) => unknown]> = [
  ['PORT', 'a port number from 0 to 65535 (0: any free port)', '9000', (c) => c.http.port],
  ['WORKER_OPS_PORT', 'a port number from 1 to 65535 (unset: no listener)', '9464', (c) => c.worker.opsPort],
  ['SEND_OUTCOME_UNKNOWN_AFTER_S', 'a whole number from 1 to 86400, in decimal digits', '900', (c) => c.sends?.outcomeUnknownAfterMs],
  ['STARTUP_WAIT_S', 'a whole number from 1 to 3600, in decimal digits', '90', (c) => c.startup?.waitMs],
  ['SHUTDOWN_DELAY_S', 'a whole number from 0 to 300, in decimal digits', '15', (c) => c.http.shutdownDelayMs],
  ['EXPORT_MAX_CONCURRENT', 'a whole number from 1 to 100, in decimal digits', '8', (c) => c.export.maxConcurrent],
  ['EXPORT_MAX_PER_KEY', 'a whole number from 1 to 100, in decimal digits', '3', (c) => c.export.maxPerKey],
  ['RATE_LIMIT_PER_MINUTE', 'a whole number from 1 to 1000000000, in decimal digits', '1200', (c) => c.rateLimit.perMinute],
  ['RATE_LIMIT_SYNC_MS', 'a whole number from 10 to 60000, in decimal digits', '250', (c) => c.rateLimit.syncMs],
  ['WEBHOOKS_RETENTION_DAYS', 'a whole number from 1 to 3650, in decimal digits', '7', (c) => c.webhooks.retentionDays],
  ['WEBHOOKS_MAX_ENDPOINTS_PER_COMPANY', 'a whole number from 1 to 100000, in decimal digits', '16', (c) => c.webhooks.maxEndpointsPerCompany],
];

const NOT_DECIMAL = ['0x10', '1e3', '0b11', '0o7', '+5', '1.0', '2.5', '12abc', '1_000', '-3', 'Infinity', '99999999999999999999'];

describe('config: numeric settings are whole numbers in decimal digits', () => {
  it.each(NUMERIC)('%s refuses hexadecimal, exponents, signs and fractions, naming itself and what to write', (name, expected) => {
    for (const value of NOT_DECIMAL) {
      expect(() => loadConfig({ [name]: value })).toThrow(`invalid configuration: ${name}: ${expected}`);
    }
  });

  it.each(NUMERIC)('%s takes decimal digits, with blanks around them', (name, _expected, valid, read) => {
    const plain = read(loadConfig({ [name]: valid }));
    expect(read(loadConfig({ [name]: ` ${valid} ` }))).toEqual(plain);
    expect(plain).not.toEqual(read(loadConfig({})));
  });

  it('the one line names every invalid number', () => {
    expect(() => loadConfig({ WEBHOOKS_MAX_ENDPOINTS_PER_COMPANY: '0x10', STARTUP_WAIT_S: '1e3' })).toThrow(
      'invalid configuration: STARTUP_WAIT_S: a whole number from 1 to 3600, in decimal digits; '
        + 'WEBHOOKS_MAX_ENDPOINTS_PER_COMPANY: a whole number from 1 to 100000, in decimal digits',
    );
  });

  it('out of range is the same message', () => {
    expect(() => loadConfig({ WEBHOOKS_MAX_ENDPOINTS_PER_COMPANY: '100001' })).toThrow('WEBHOOKS_MAX_ENDPOINTS_PER_COMPANY: a whole number from 1 to 100000, in decimal digits');
    expect(() => loadConfig({ RATE_LIMIT_PER_MINUTE: '0' })).toThrow('RATE_LIMIT_PER_MINUTE: a whole number from 1 to 1000000000, in decimal digits');
    expect(loadConfig({ PORT: '0' }).http.port).toBe(0);
    expect(loadConfig({ WEBHOOKS_MAX_ENDPOINTS_PER_COMPANY: '010' }).webhooks.maxEndpointsPerCompany).toBe(10); // decimal, not octal
  });
});
