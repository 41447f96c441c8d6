import type { Pool } from 'pg';
import type { RecordedEvent } from '../../ports/event-store';
import { findNumberAndTemplate, type NumberRecord, type TemplateRecord } from '../../projections/accounts/queries';

type Found = { number: NumberRecord; template: TemplateRecord | undefined };

/** Events that change a number or a template as a send sees them (the accounts read model). */
const CATALOG_EVENTS = new Set([
  'PhoneNumberRegistered', 'PhoneNumberDetailsChanged', 'MessagingTierChanged', 'QualityRatingChanged',
  'TemplateRegistered', 'TemplateChanged', 'TemplateStatusChanged',
]);

/**
 * Per-process cache of what a send validates against: the company's number and its template by name and language
 * (from the accounts read model). Dropped as soon as this process's runner commits a number or template change, so
 * a change that waited for its read models is seen by the next send; changes applied by another process are seen
 * within `maxAgeMs` (the accounts model is itself eventually consistent with the log). Misses are not cached.
 */
export class SendCatalog {
  private readonly entries = new Map<string, { found: Found; storedAt: number }>();
  private generation = 0;

  constructor(
    private readonly pool: Pool,
    runner: { onBatchCommitted(listener: (projection: string, events: readonly RecordedEvent[]) => void): () => void },
    private readonly options: { maxAgeMs?: number; maxEntries?: number } = {},
  ) {
    runner.onBatchCommitted((projection, events) => {
      if (projection === 'accounts' && events.some((e) => CATALOG_EVENTS.has(e.type))) this.clear();
    });
  }

  async find(companyId: number, phoneNumberId: string, name: string, language: string): Promise<Found | undefined> {
    const key = JSON.stringify([companyId, phoneNumberId, name, language]);
    const hit = this.entries.get(key);
    if (hit && Date.now() - hit.storedAt < (this.options.maxAgeMs ?? 1000)) return hit.found;
    const generation = this.generation;
    const found = await findNumberAndTemplate(this.pool, companyId, phoneNumberId, name, language);
    if (found && generation === this.generation) {
      if (this.entries.size >= (this.options.maxEntries ?? 10_000)) this.entries.delete(this.entries.keys().next().value as string);
      this.entries.set(key, { found, storedAt: Date.now() });
    }
    return found;
  }

  clear(): void {
    this.generation++;
    this.entries.clear();
  }
}

const catalogs = new WeakMap<object, SendCatalog>();

/** The catalog of a set of services (one per runner, so per process in production, per test context in tests). */
export function sendCatalogOf(services: { pool: Pool; runner: ConstructorParameters<typeof SendCatalog>[1] }): SendCatalog {
  let catalog = catalogs.get(services.runner);
  if (!catalog) {
    catalog = new SendCatalog(services.pool, services.runner);
    catalogs.set(services.runner, catalog);
  }
  return catalog;
}
