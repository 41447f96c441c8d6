import type { Services } from '../../services';
import { buildDemoFixture, DEMO_COMPANY_ID } from './demo-fixture';
import { generateApiKey } from './keys';
import { type SeedSummary, seedFixture } from './seed';

export interface DemoResult {
  companyId: number;
  /** the clear company key: shown once, stored only as its keyed hash */
  key: string;
  summary: SeedSummary;
}

/** Seeds (or refreshes) the demo company with a freshly generated company key. */
export async function seedDemo(services: Services, options: { actor: string; onProgress?: (m: string) => void }): Promise<DemoResult> {
  const key = generateApiKey(services.config.apiKeyPrefix, 'company');
  const fixture = buildDemoFixture({ key, now: services.now() });
  const summary = await seedFixture(services, fixture, options);
  return { companyId: DEMO_COMPANY_ID, key, summary };
}

/** Three requests to try the demo key with. */
export function demoExamples(baseUrl: string, key: string, now: Date): string[] {
  const year = now.getUTCFullYear();
  return [
    `curl -s -H 'X-API-Key: ${key}' ${baseUrl}/api/v1/business-accounts/`,
    `curl -s -H 'X-API-Key: ${key}' ${baseUrl}/api/v1/business-hours/`,
    `curl -s -H 'X-API-Key: ${key}' '${baseUrl}/api/v1/holidays/?from=${year}-12-01&to=${year}-12-31'`,
  ];
}
