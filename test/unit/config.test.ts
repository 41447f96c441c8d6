import { ConfigError, loadConfig } from '../../src/config';

describe('config', () => {
  it.each([
    'postgres://u:p@db.example:5432/app',
    'postgresql://u@localhost/app',
    'postgres://u:p@/app?host=/var/run/postgresql&port=5433', // libpq's Unix-socket form
    'postgres:///app?host=/tmp',
  ])('takes DATABASE_URL %s', (url) => {
    expect(loadConfig({ DATABASE_URL: url, ANONYMIZATION_SECRET: 'a'.repeat(32), API_KEY_PEPPER: 'b'.repeat(32) }).databaseUrl).toBe(url);
  });

  it.each(['not-a-url', 'mysql://u:p@127.0.0.1:3306/db', 'postgres//u@host/db'])('refuses DATABASE_URL %s', (url) => {
    expect(() => loadConfig({ DATABASE_URL: url, ANONYMIZATION_SECRET: 'a'.repeat(32), API_KEY_PEPPER: 'b'.repeat(32) }))
      .toThrow(/DATABASE_URL: not a postgres:\/\/ URL/);
  });

  it('has the documented defaults with an empty environment', () => {
    const c = loadConfig({});
    expect(c.http).toEqual({ port: 8080, host: '127.0.0.1', shutdownDelayMs: 0 });
    expect(c.dataDir).toBe('./.switchboard');
    expect(c.databaseUrl).toBeUndefined();
    expect(c.eventStore).toEqual({ kind: 'postgres' });
    expect(c.kafka).toBeUndefined();
    expect(c.provider.kind).toBe('sandbox');
    expect(c.provider.sandboxDelivery).toBe('auto');
    expect(c.apiKeyPrefix).toBe('sbk');
    expect(c.logLevel).toBe('info');
    expect(c.webhooks).toEqual({ allowPrivateUrls: false, allowHttp: false, retentionDays: 30, maxEndpointsPerCompany: 100 });
    expect(c.worker).toEqual({ opsPort: undefined });
  });

  it('reads every variable', () => {
    const c = loadConfig({
      PORT: '9000', HOST: '0.0.0.0', DATA_DIR: '/d', DATABASE_URL: 'postgres://x/y', EVENT_STORE: 'esdb',
      EVENTSTORE_URL: 'esdb://h:2113?tls=false', KAFKA_BROKERS: 'a:9092, b:9092', KAFKA_CLIENT_ID: 'c', PROVIDER: 'cloud-api',
      PROVIDER_BASE_URL: 'http://p', PROVIDER_API_VERSION: 'v1', PROVIDER_ACCESS_TOKEN: 't', PROVIDER_APP_SECRET: 's',
      PROVIDER_VERIFY_TOKEN: 'v', SANDBOX_DELIVERY: 'off', ANONYMIZATION_SECRET: 'an-anonymization-secret', API_KEY_PEPPER: 'pe', API_KEY_PREFIX: 'abc', LOG_LEVEL: 'warn', SHUTDOWN_DELAY_S: '20',
    });
    expect(c.http).toEqual({ port: 9000, host: '0.0.0.0', shutdownDelayMs: 20_000 });
    expect(c.eventStore).toEqual({ kind: 'esdb', url: 'esdb://h:2113?tls=false' });
    expect(c.kafka).toEqual({ brokers: ['a:9092', 'b:9092'], clientId: 'c' });
    expect(c.provider).toEqual({ kind: 'cloud-api', baseUrl: 'http://p', apiVersion: 'v1', accessToken: 't', appSecret: 's', verifyToken: 'v', sandboxDelivery: 'off' });
    expect(c.secrets).toEqual({ anonymizationSecret: 'an-anonymization-secret', apiKeyPepper: 'pe' });
    expect(c.apiKeyPrefix).toBe('abc');
  });

  it('names an invalid variable', () => {
    expect(() => loadConfig({ PORT: 'abc' })).toThrow('invalid configuration: PORT: a port number from 0 to 65535 (0: any free port)');
    expect(() => loadConfig({ SANDBOX_DELIVERY: 'sometimes' })).toThrow(/SANDBOX_DELIVERY/);
    for (const days of ['0', '1.5', 'month', '3651']) expect(() => loadConfig({ WEBHOOKS_RETENTION_DAYS: days })).toThrow(/WEBHOOKS_RETENTION_DAYS/);
    expect(loadConfig({ WEBHOOKS_RETENTION_DAYS: '7' }).webhooks.retentionDays).toBe(7);
    for (const n of ['0', '2.5', 'many', '100001']) expect(() => loadConfig({ WEBHOOKS_MAX_ENDPOINTS_PER_COMPANY: n })).toThrow(/WEBHOOKS_MAX_ENDPOINTS_PER_COMPANY/);
    expect(loadConfig({ WEBHOOKS_MAX_ENDPOINTS_PER_COMPANY: '16' }).webhooks.maxEndpointsPerCompany).toBe(16);
    for (const proxy of ['proxy:3128', 'socks5://proxy:1080', 'ftp://proxy', 'http://']) {
      expect(() => loadConfig({ WEBHOOKS_PROXY_URL: proxy })).toThrow('invalid configuration: WEBHOOKS_PROXY_URL: not an http:// or https:// proxy URL (http://egress-proxy.internal:4750)');
    }
    expect(loadConfig({ WEBHOOKS_PROXY_URL: 'http://user:pw@egress:3128' }).webhooks.proxyUrl).toBe('http://user:pw@egress:3128');
    expect(loadConfig({ WEBHOOKS_PROXY_URL: '' }).webhooks.proxyUrl).toBeUndefined();
    for (const brokers of ['localhost', 'kafka://h:9092', ',', 'h:9092,', 'h:0', 'h:99999', 'h: 9092x']) {
      expect(() => loadConfig({ KAFKA_BROKERS: brokers })).toThrow('invalid configuration: KAFKA_BROKERS: not a comma-separated list of host:port (kafka-1:9092,kafka-2:9092)');
    }
    expect(loadConfig({ KAFKA_BROKERS: 'kafka-1:9092, 10.0.0.7:9093,[::1]:9094' }).kafka?.brokers).toEqual(['kafka-1:9092', '10.0.0.7:9093', '[::1]:9094']);
    expect(loadConfig({ KAFKA_BROKERS: ' ' }).kafka).toBeUndefined();
    expect(loadConfig({ PORT: '' }).http.port).toBe(8080); // empty is unset, not port 0 (any free port)
    expect(loadConfig({ PORT: '0' }).http.port).toBe(0);
    for (const port of ['0', '65536', '94.5', 'metrics']) {
      expect(() => loadConfig({ WORKER_OPS_PORT: port })).toThrow('invalid configuration: WORKER_OPS_PORT: a port number from 1 to 65535 (unset: no listener)');
    }
    expect(loadConfig({ WORKER_OPS_PORT: '9464' }).worker.opsPort).toBe(9464);
    expect(loadConfig({ WORKER_OPS_PORT: ' ' }).worker.opsPort).toBeUndefined();
  });

  it('names every missing dependent variable', () => {
    const attempt = () => loadConfig({ EVENT_STORE: 'esdb', DATABASE_URL: 'postgres://x', PROVIDER: 'cloud-api' });
    expect(attempt).toThrow(ConfigError);
    expect(attempt).toThrow(/EVENTSTORE_URL: required when EVENT_STORE=esdb/);
    expect(attempt).toThrow(/ANONYMIZATION_SECRET: required when DATABASE_URL is set/);
    expect(attempt).toThrow(/API_KEY_PEPPER: required when DATABASE_URL is set/);
    expect(attempt).toThrow(/PROVIDER_ACCESS_TOKEN: required when PROVIDER=cloud-api/);
  });

  it('refuses PROVIDER_APP_SECRET_PREVIOUS without PROVIDER_APP_SECRET (it would verify nothing)', () => {
    expect(() => loadConfig({ PROVIDER_APP_SECRET_PREVIOUS: 'old' })).toThrow(/PROVIDER_APP_SECRET: required when PROVIDER_APP_SECRET_PREVIOUS is set/);
    expect(loadConfig({ PROVIDER_APP_SECRET: 'new', PROVIDER_APP_SECRET_PREVIOUS: 'old' }).provider).toMatchObject({ appSecret: 'new', appSecretPrevious: 'old' });
  });
});
