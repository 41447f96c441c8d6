import { z } from 'zod';
import { MAX_RATE_LIMIT_PER_MINUTE } from './commands/provisioning/company/decider';
import { parseEsdbConnectionString } from './shared/esdb-connection-string';

const isProxyUrl = (v: string): boolean => {
  try {
    const u = new URL(v);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname !== '';
  } catch {
    return false;
  }
};

/** `host:port[,host:port...]`: kafkajs takes brokers in that form only (no scheme; a missing port is NaN). */
const isBrokerList = (v: string): boolean =>
  v.split(',').every((b) => {
    const m = /^([A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]):(\d{1,5})$/.exec(b.trim());
    return m !== null && Number(m[2]) >= 1 && Number(m[2]) <= 65_535;
  });

const optional = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v));

const PORT_NUMBER = 'a port number from 1 to 65535 (unset: no listener)';

/**
 * A whole number in decimal digits from `min` to `max` (blanks around it ignored). `Number()` alone, as `z.coerce`
 * does, also takes `0x10`, `1e3`, `0b11`, `+5` and `1.0`: a value an operator may read otherwise than the service.
 * Every failure gives `expected`, which says what to write.
 */
function wholeNumber(min: number, max: number, expected = wholeNumberExpected(min, max)) {
  return z
    .string({ error: expected })
    .trim()
    .regex(/^\d+$/, expected)
    .transform(Number)
    .pipe(z.number().int(expected).min(min, expected).max(max, expected));
}

const wholeNumberExpected = (min: number, max: number): string => `a whole number from ${min} to ${max}, in decimal digits`;

/**
 * Export pages streaming at once: each holds a connection of the export's own pool, whose size this is, so it must
 * fit the Postgres's `max_connections` beside the service's other pools (40 connections a `serve`; the embedded
 * Postgres allows 200).
 */
const MAX_EXPORTS_AT_ONCE = 100;

/**
 * The shortest ANONYMIZATION_SECRET a start takes, in characters. The export shows pairs of real and anonymized ids
 * (`company_id` beside `client_id`), so a guess of the secret is checked offline; 8 characters of letters and digits
 * are some 2.8e12 guesses (hours on one GPU), 16 are out of reach. Length is no proof of randomness: set 32 random
 * bytes (docs/privacy.md, "ANONYMIZATION_SECRET").
 */
export const MIN_ANONYMIZATION_SECRET_CHARS = 16;

/** Why ANONYMIZATION_SECRET is refused, or undefined; never its value. */
export function anonymizationSecretProblem(secret: string): string | undefined {
  const chars = [...secret].length;
  if (chars >= MIN_ANONYMIZATION_SECRET_CHARS) return undefined;
  return `too short (${chars} character${chars === 1 ? '' : 's'}, at least ${MIN_ANONYMIZATION_SECRET_CHARS}): the export's anonymized ids could be reversed by guessing it; set 32 random bytes, e.g. \`openssl rand -hex 32\` (changing it changes every exported id; docs/privacy.md)`;
}

/** The form of EVENTSTORE_URL, for messages (a server without TLS, as docker-compose.yml runs it). */
export const EVENTSTORE_URL_FORM = 'esdb://host:2113?tls=false';

/**
 * Why `url` is not a connection string the EventStoreDB client takes (its own parser says), or undefined. Only the
 * position and what was expected there: the text at that position may be a password.
 */
function esdbUrlProblem(url: string): string | undefined {
  try {
    parseEsdbConnectionString(url); // loaded only when EventStoreDB is configured
    return undefined;
  } catch (err) {
    const { location, expected } = err as { location?: [number, number]; expected?: string };
    const where = location && expected ? ` (at position ${location[0]}, expected ${expected})` : '';
    return `not an EventStoreDB connection string${where}; the form is ${EVENTSTORE_URL_FORM}`;
  }
}

const configSchema = z
  .object({
    // empty is unset (the default), not port 0 (any free port: what an explicit 0 asks for)
    PORT: wholeNumber(0, 65_535, 'a port number from 0 to 65535 (0: any free port)').default(8080),
    HOST: z.string().default('127.0.0.1'),
    WORKER_OPS_PORT: wholeNumber(1, 65_535, PORT_NUMBER).optional(),
    DATA_DIR: z.string().default('./.switchboard'),
    DATABASE_URL: optional.refine((v) => v === undefined || isPostgresUrl(v), 'not a postgres:// URL (postgres://user:password@host:5432/database)'),
    EVENT_STORE: z.enum(['postgres', 'esdb']).default('postgres'),
    EVENTSTORE_URL: optional,
    KAFKA_BROKERS: optional.refine((v) => v === undefined || isBrokerList(v), 'not a comma-separated list of host:port (kafka-1:9092,kafka-2:9092)'),
    KAFKA_CLIENT_ID: z.string().default('switchboard'),
    PROVIDER: z.enum(['sandbox', 'cloud-api']).default('sandbox'),
    PROVIDER_BASE_URL: z.string().default('https://graph.facebook.com'),
    PROVIDER_API_VERSION: z.string().default('v21.0'),
    PROVIDER_ACCESS_TOKEN: optional,
    PROVIDER_APP_SECRET: optional,
    PROVIDER_APP_SECRET_PREVIOUS: optional,
    PROVIDER_VERIFY_TOKEN: optional,
    SANDBOX_DELIVERY: z.enum(['auto', 'off']).default('auto'),
    SEND_OUTCOME_UNKNOWN_AFTER_S: wholeNumber(1, 86_400).default(600),
    ANONYMIZATION_SECRET: optional,
    API_KEY_PEPPER: optional,
    API_KEY_PREFIX: z
      .string()
      .regex(/^[a-z][a-z0-9]*$/, 'lowercase letters and digits')
      .default('sbk'),
    STARTUP_WAIT_S: wholeNumber(1, 3_600).default(60),
    SHUTDOWN_DELAY_S: wholeNumber(0, 300).default(0),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    EXPORT_MAX_CONCURRENT: wholeNumber(1, MAX_EXPORTS_AT_ONCE).default(4),
    EXPORT_MAX_PER_KEY: wholeNumber(1, MAX_EXPORTS_AT_ONCE).default(2),
    RATE_LIMIT_ENABLED: z.enum(['true', 'false']).default('true'),
    RATE_LIMIT_PER_MINUTE: wholeNumber(1, MAX_RATE_LIMIT_PER_MINUTE).default(60_000), // a company's own limit's too
    RATE_LIMIT_SYNC_MS: wholeNumber(10, 60_000).default(200),
    WEBHOOKS_ALLOW_PRIVATE_URLS: z.enum(['true', 'false']).default('false'),
    WEBHOOKS_ALLOW_HTTP: z.enum(['true', 'false']).default('false'),
    WEBHOOKS_RETENTION_DAYS: wholeNumber(1, 3_650).default(30),
    WEBHOOKS_MAX_ENDPOINTS_PER_COMPANY: wholeNumber(1, 100_000).default(100),
    WEBHOOKS_PROXY_URL: optional.refine((v) => v === undefined || isProxyUrl(v), 'not an http:// or https:// proxy URL (http://egress-proxy.internal:4750)'),
  })
  .superRefine((c, ctx) => {
    if (c.EVENT_STORE === 'esdb') checkEventStoreUrl(c.EVENTSTORE_URL, ctx);
    const secretProblem = c.ANONYMIZATION_SECRET === undefined ? undefined : anonymizationSecretProblem(c.ANONYMIZATION_SECRET);
    if (secretProblem) ctx.addIssue({ code: 'custom', path: ['ANONYMIZATION_SECRET'], message: secretProblem });
    if (c.DATABASE_URL) {
      for (const name of ['ANONYMIZATION_SECRET', 'API_KEY_PEPPER'] as const) {
        if (!c[name]) ctx.addIssue({ code: 'custom', path: [name], message: 'required when DATABASE_URL is set' });
      }
    }
    if (c.PROVIDER === 'cloud-api' && !c.PROVIDER_ACCESS_TOKEN) {
      ctx.addIssue({ code: 'custom', path: ['PROVIDER_ACCESS_TOKEN'], message: 'required when PROVIDER=cloud-api' });
    }
    if (c.PROVIDER_APP_SECRET_PREVIOUS && !c.PROVIDER_APP_SECRET) {
      // alone it would verify nothing: the ingress refuses every notification without PROVIDER_APP_SECRET
      ctx.addIssue({ code: 'custom', path: ['PROVIDER_APP_SECRET'], message: 'required when PROVIDER_APP_SECRET_PREVIOUS is set (the new secret; the previous one is only accepted beside it)' });
    }
  });

export type RawConfig = z.infer<typeof configSchema>;

/** EVENTSTORE_URL, with EVENT_STORE=esdb: given, and a connection string the client takes. */
function checkEventStoreUrl(url: string | undefined, ctx: z.RefinementCtx): void {
  const problem = url ? esdbUrlProblem(url) : `required when EVENT_STORE=esdb (${EVENTSTORE_URL_FORM})`;
  if (problem) ctx.addIssue({ code: 'custom', path: ['EVENTSTORE_URL'], message: problem });
}

export interface Config {
  /** shutdownDelayMs: at a stop signal, /readyz answers 503 for this long before the listener closes */
  http: { port: number; host: string; shutdownDelayMs: number };
  /** `worker`'s listener for /healthz, /readyz and /metrics on http.host (none when unset) */
  worker: { opsPort: number | undefined };
  dataDir: string;
  databaseUrl: string | undefined;
  eventStore: { kind: 'postgres' } | { kind: 'esdb'; url: string };
  kafka: { brokers: string[]; clientId: string } | undefined;
  provider: {
    kind: 'sandbox' | 'cloud-api';
    baseUrl: string;
    apiVersion: string;
    accessToken: string | undefined;
    appSecret: string | undefined;
    /** the secret before a reset, accepted beside `appSecret` while the provider's deliveries switch over */
    appSecretPrevious?: string;
    verifyToken: string | undefined;
    sandboxDelivery: 'auto' | 'off';
  };
  /** a keyed send whose answer was never recorded is recorded `interrupted` after this long (docs/sends.md) */
  sends?: { outcomeUnknownAfterMs: number };
  /** undefined until resolved: generated into DATA_DIR on first embedded start when not given */
  secrets: { anonymizationSecret: string | undefined; apiKeyPepper: string | undefined };
  apiKeyPrefix: string;
  logLevel: RawConfig['LOG_LEVEL'];
  /** export pages streaming at once in this process, and per API key; the export pool has maxConcurrent connections */
  export: { maxConcurrent: number; maxPerKey: number };
  /** requests per minute per API key (docs/rate-limits.md); perMinute: the default of companies without their own */
  rateLimit: { enabled: boolean; perMinute: number; syncMs: number };
  /** how long start-up waits for Postgres and Kafka to answer (default 60 s) */
  startup?: { waitMs: number };
  /**
   * client webhook endpoints (docs/webhooks.md): operator escapes for private addresses and plain http; how many days
   * attempts and finished deliveries are kept; the egress proxy every webhook request goes through, if any
   */
  webhooks: { allowPrivateUrls: boolean; allowHttp: boolean; retentionDays: number; maxEndpointsPerCompany: number; proxyUrl?: string };
}

/** postgres:// or postgresql://, including libpq's Unix-socket form (no host, `?host=/socket/dir`). */
function isPostgresUrl(value: string): boolean {
  const socketForm = /^postgres(ql)?:\/\/[^/]*@\/[^?]*\?(.*&)?host=\//i.test(value);
  try {
    return ['postgres:', 'postgresql:'].includes(new URL(socketForm ? value.replace(/@\//, '@localhost/') : value).protocol);
  } catch {
    return false;
  }
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/**
 * A variable set to nothing (`VAR=` in an env file, compose's `${VAR:-}`) is unset: its default. Otherwise an empty
 * DATA_DIR would put the cluster and secrets.json in the working folder, and an empty number would read as 0.
 */
const withoutBlanks = (env: NodeJS.ProcessEnv): NodeJS.ProcessEnv =>
  Object.fromEntries(Object.entries(env).filter(([, v]) => v === undefined || v.trim() !== ''));

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = configSchema.safeParse(withoutBlanks(env));
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(env)'}: ${i.message}`);
    throw new ConfigError(`invalid configuration: ${issues.join('; ')}`);
  }
  const c = parsed.data;
  return {
    http: { port: c.PORT, host: c.HOST, shutdownDelayMs: c.SHUTDOWN_DELAY_S * 1000 },
    worker: { opsPort: c.WORKER_OPS_PORT },
    dataDir: c.DATA_DIR,
    databaseUrl: c.DATABASE_URL,
    eventStore: c.EVENT_STORE === 'esdb' ? { kind: 'esdb', url: c.EVENTSTORE_URL as string } : { kind: 'postgres' },
    kafka: c.KAFKA_BROKERS
      ? { brokers: c.KAFKA_BROKERS.split(',').map((b) => b.trim()).filter(Boolean), clientId: c.KAFKA_CLIENT_ID }
      : undefined,
    provider: {
      kind: c.PROVIDER,
      baseUrl: c.PROVIDER_BASE_URL,
      apiVersion: c.PROVIDER_API_VERSION,
      accessToken: c.PROVIDER_ACCESS_TOKEN,
      appSecret: c.PROVIDER_APP_SECRET,
      appSecretPrevious: c.PROVIDER_APP_SECRET_PREVIOUS,
      verifyToken: c.PROVIDER_VERIFY_TOKEN,
      sandboxDelivery: c.SANDBOX_DELIVERY,
    },
    sends: { outcomeUnknownAfterMs: c.SEND_OUTCOME_UNKNOWN_AFTER_S * 1000 },
    secrets: { anonymizationSecret: c.ANONYMIZATION_SECRET, apiKeyPepper: c.API_KEY_PEPPER },
    apiKeyPrefix: c.API_KEY_PREFIX,
    logLevel: c.LOG_LEVEL,
    export: { maxConcurrent: c.EXPORT_MAX_CONCURRENT, maxPerKey: c.EXPORT_MAX_PER_KEY },
    rateLimit: { enabled: c.RATE_LIMIT_ENABLED === 'true', perMinute: c.RATE_LIMIT_PER_MINUTE, syncMs: c.RATE_LIMIT_SYNC_MS },
    startup: { waitMs: c.STARTUP_WAIT_S * 1000 },
    webhooks: {
      allowPrivateUrls: c.WEBHOOKS_ALLOW_PRIVATE_URLS === 'true',
      allowHttp: c.WEBHOOKS_ALLOW_HTTP === 'true',
      retentionDays: c.WEBHOOKS_RETENTION_DAYS,
      maxEndpointsPerCompany: c.WEBHOOKS_MAX_ENDPOINTS_PER_COMPANY,
      ...(c.WEBHOOKS_PROXY_URL === undefined ? {} : { proxyUrl: c.WEBHOOKS_PROXY_URL }),
    },
  };
}
