import { z } from 'zod';

const optional = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v));

const configSchema = z
  .object({
    PORT: z.coerce.number().int().min(0).max(65535).default(8080),
    HOST: z.string().default('127.0.0.1'),
    DATA_DIR: z.string().default('./.switchboard'),
    DATABASE_URL: optional,
    EVENT_STORE: z.enum(['postgres', 'esdb']).default('postgres'),
    EVENTSTORE_URL: optional,
    KAFKA_BROKERS: optional,
    KAFKA_CLIENT_ID: z.string().default('switchboard'),
    PROVIDER: z.enum(['sandbox', 'cloud-api']).default('sandbox'),
    PROVIDER_BASE_URL: z.string().default('https://graph.facebook.com'),
    PROVIDER_API_VERSION: z.string().default('v21.0'),
    PROVIDER_ACCESS_TOKEN: optional,
    PROVIDER_APP_SECRET: optional,
    PROVIDER_VERIFY_TOKEN: optional,
    SANDBOX_DELIVERY: z.enum(['auto', 'off']).default('auto'),
    ANONYMIZATION_SECRET: optional,
    API_KEY_PEPPER: optional,
    API_KEY_PREFIX: z
      .string()
      .regex(/^[a-z][a-z0-9]*$/, 'lowercase letters and digits')
      .default('sbk'),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    EXPORT_MAX_CONCURRENT: z.coerce.number().int().min(1).default(4),
    EXPORT_MAX_PER_KEY: z.coerce.number().int().min(1).default(2),
  })
  .superRefine((c, ctx) => {
    if (c.EVENT_STORE === 'esdb' && !c.EVENTSTORE_URL) {
      ctx.addIssue({ code: 'custom', path: ['EVENTSTORE_URL'], message: 'required when EVENT_STORE=esdb' });
    }
    if (c.DATABASE_URL) {
      for (const name of ['ANONYMIZATION_SECRET', 'API_KEY_PEPPER'] as const) {
        if (!c[name]) ctx.addIssue({ code: 'custom', path: [name], message: 'required when DATABASE_URL is set' });
      }
    }
    if (c.PROVIDER === 'cloud-api' && !c.PROVIDER_ACCESS_TOKEN) {
      ctx.addIssue({ code: 'custom', path: ['PROVIDER_ACCESS_TOKEN'], message: 'required when PROVIDER=cloud-api' });
    }
  });

export type RawConfig = z.infer<typeof configSchema>;

export interface Config {
  http: { port: number; host: string };
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
    verifyToken: string | undefined;
    sandboxDelivery: 'auto' | 'off';
  };
  /** undefined until resolved: generated into DATA_DIR on first embedded start when not given */
  secrets: { anonymizationSecret: string | undefined; apiKeyPepper: string | undefined };
  apiKeyPrefix: string;
  logLevel: RawConfig['LOG_LEVEL'];
  /** export pages streaming at once in this process, and per API key; the export pool has maxConcurrent connections */
  export: { maxConcurrent: number; maxPerKey: number };
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = configSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.') || '(env)'}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
  }
  const c = parsed.data;
  return {
    http: { port: c.PORT, host: c.HOST },
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
      verifyToken: c.PROVIDER_VERIFY_TOKEN,
      sandboxDelivery: c.SANDBOX_DELIVERY,
    },
    secrets: { anonymizationSecret: c.ANONYMIZATION_SECRET, apiKeyPepper: c.API_KEY_PEPPER },
    apiKeyPrefix: c.API_KEY_PREFIX,
    logLevel: c.LOG_LEVEL,
    export: { maxConcurrent: c.EXPORT_MAX_CONCURRENT, maxPerKey: c.EXPORT_MAX_PER_KEY },
  };
}
