import type { FastifyInstance } from 'fastify';
import { appScoped } from './app-scoped';
import type { Pool, PoolClient } from 'pg';
import type { KnownContact, UpsertMemory } from '../commands/contact/handler';
import type { ContactListInfo } from '../commands/contact/model';
import { CONTACTS_CHANGED_CHANNEL, isChanging } from '../projections/change-signals';
import { PgListener } from '../shared/pg-listener';
import { phoneVariants } from '../shared/phone';

/** A cached read of one number: the response body as seen at a time (ms of the caller's clock). */
export interface ContactView {
  render(nowMs: number): string;
}

export type ContactViewKind = 'lookup' | 'external';

interface Entry {
  view: ContactView;
  storedAt: number;
}

/** how many recent invalidations a load that overlapped them can be checked against */
const RECENT = 1024;
/** the weight of the latest observation in the moving share of new numbers (about the last 20 count) */
const NEW_SHARE_WEIGHT = 0.05;
/** above this share of new numbers the upsert tries a create before reading (src/commands/contact/handler.ts) */
const NEW_SHARE_TO_CREATE_FIRST = 0.5;

/**
 * Per-process cache of the contact reads by number (lookup and external get), per (company, normalized phone), so
 * a repeated read costs no database round trip. What is cached is the response as a function of the time:
 * time-dependent fields (the session window, expiring custom-field values) are computed from the cached data
 * when the entry is read, never cached as they were.
 *
 * Correctness rests on invalidation, as in src/http/read-cache.ts: the contacts projection notifies
 * `rm_contacts_changed` with `<companyId>:<phone>` (a number's contacts, their custom-field values, its replies)
 * or `<companyId>` (lists, field definitions) in the transaction that changes the rows, and marks those keys as
 * changing in this process before it commits (src/projections/change-signals.ts). So:
 *  - while a key is marked (a change of this process is being committed, or was a moment ago) the cache is
 *    bypassed for it: a write that waited for the read model (the upsert) is visible to the next read;
 *  - a notification drops the number's entries (every spelling of it: phoneVariants) or the company's;
 *  - a value loaded while a notification for its number or company arrived is not cached;
 *  - while the LISTEN connection is down the cache is bypassed, and whatever was cached is dropped when it is
 *    lost or re-established; an entry lives at most `maxAgeMs` (a backstop, e.g. for a rebuild's schema swap).
 */
export class ContactCache {
  /** by `<companyId>:<e164>` */
  private readonly entries = new Map<string, { variants: string[]; views: Partial<Record<ContactViewKind, Entry>> }>();
  /** the upsert memory (`upserts`), by `<companyId>:<e164>` */
  private readonly known = new Map<string, { known: KnownContact; storedAt: number }>();
  /** the upsert memory's lists, by `<companyId>:<listId or "default">` */
  private readonly lists = new Map<string, { list: ContactListInfo; storedAt: number }>();
  /** per company: the share of numbers the upsert memory did not know that turned out new (moving average) */
  private readonly newShare = new Map<number, number>();
  private epoch = 0;
  /** invalidations so far; `recent` holds the keys of the last RECENT of them (invalidation i at i % RECENT) */
  private seq = 0;
  private readonly recent: string[] = new Array<string>(RECENT);
  private readonly listener: PgListener;

  constructor(
    pool: Pool,
    private readonly options: { maxEntries?: number; maxAgeMs?: number } = {},
  ) {
    this.listener = new PgListener(pool, [CONTACTS_CHANGED_CHANNEL], {
      onNotify: (_channel, payload) => this.invalidate(payload ?? '*'),
      onReset: () => this.clear(),
    });
  }

  get active(): boolean {
    return this.listener.connection !== undefined;
  }

  /**
   * The upsert handler's memory of the last upsert of each number (src/commands/contact/handler.ts, UpsertMemory),
   * kept with the same signals: a number is forgotten when its claims change (`claim:<companyId>:<phone>`), a
   * company's numbers when its lists or custom fields change, everything when the LISTEN connection is lost; while
   * it is down, or while such a change of this process is being committed, nothing is recalled. Changes of the
   * contact itself need no signal: the upsert appends with the remembered revision.
   */
  readonly upserts: UpsertMemory = {
    ticket: () => ({ connection: this.listener.connection, epoch: this.epoch, seq: this.seq }),
    recall: (companyId, phone) => {
      if (!this.listener.connection || !this.claimsQuiet(companyId, phone)) return undefined;
      const hit = this.known.get(`${companyId}:${phone}`);
      return hit && Date.now() - hit.storedAt < (this.options.maxAgeMs ?? 60_000) ? hit.known : undefined;
    },
    remember: (ticket, companyId, phone, known) => {
      const t = ticket as { connection: PoolClient | undefined; epoch: number; seq: number };
      const key = `${companyId}:${phone}`;
      if (!t.connection || this.listener.connection !== t.connection || this.epoch !== t.epoch) return;
      if (!this.untouchedSince(t.seq, companyId, `claim:${key}`) || !this.claimsQuiet(companyId, phone)) return;
      this.known.delete(key);
      if (this.known.size >= (this.options.maxEntries ?? 20_000)) this.known.delete(this.known.keys().next().value as string);
      this.known.set(key, { known, storedAt: Date.now() });
    },
    forget: (companyId, phone) => {
      this.known.delete(`${companyId}:${phone}`);
    },
    recallList: (companyId, listId) => {
      if (!this.listener.connection || !this.listsQuiet(companyId)) return undefined;
      const hit = this.lists.get(`${companyId}:${listId ?? 'default'}`);
      return hit && Date.now() - hit.storedAt < (this.options.maxAgeMs ?? 60_000) ? hit.list : undefined;
    },
    rememberList: (ticket, companyId, listId, list) => {
      const t = ticket as { connection: PoolClient | undefined; epoch: number; seq: number };
      if (!t.connection || this.listener.connection !== t.connection || this.epoch !== t.epoch) return;
      if (!this.untouchedSince(t.seq, companyId, String(companyId)) || !this.listsQuiet(companyId)) return;
      if (this.lists.size >= 1_000) this.lists.delete(this.lists.keys().next().value as string);
      this.lists.set(`${companyId}:${listId ?? 'default'}`, { list, storedAt: Date.now() });
    },
    expectsNew: (companyId) => (this.newShare.get(companyId) ?? 0) >= NEW_SHARE_TO_CREATE_FIRST,
    observe: (companyId, wasNew) => {
      const share = this.newShare.get(companyId) ?? 0;
      if (share === 0 && !this.newShare.has(companyId) && this.newShare.size >= 10_000) this.newShare.clear();
      this.newShare.set(companyId, share + NEW_SHARE_WEIGHT * ((wasNew ? 1 : 0) - share));
    },
  };

  get size(): number {
    return this.entries.size;
  }

  start(): Promise<void> {
    return this.listener.start();
  }

  stop(): Promise<void> {
    return this.listener.stop();
  }

  /** The cached view of (kind, company, number), else `load()`'s, cached when nothing may have changed meanwhile. */
  async get(kind: ContactViewKind, companyId: number, e164: string, load: () => Promise<ContactView>): Promise<ContactView> {
    const key = `${companyId}:${e164}`;
    const connection = this.listener.connection;
    const slot = this.entries.get(key);
    const variants = slot?.variants ?? phoneVariants(e164);
    if (connection && slot && this.quiet(companyId, variants)) {
      const hit = slot.views[kind];
      if (hit && Date.now() - hit.storedAt < (this.options.maxAgeMs ?? 60_000)) return hit.view;
    }
    const epoch = this.epoch;
    const seq = this.seq;
    const view = await load();
    if (connection && this.listener.connection === connection && this.epoch === epoch && this.untouchedSince(seq, companyId, key) && this.quiet(companyId, variants)) {
      let stored = this.entries.get(key);
      if (!stored) {
        if (this.entries.size >= (this.options.maxEntries ?? 20_000)) this.entries.delete(this.entries.keys().next().value as string);
        this.entries.set(key, (stored = { variants, views: {} }));
      }
      stored.views[kind] = { view, storedAt: Date.now() };
    }
    return view;
  }

  /**
   * This process changed the number (an upsert whose events the read model has applied): its entries go now, not
   * when the notification arrives, and a read that started before is not cached. Marks do that when this process
   * applies the projection; this covers a worker process applying it (read-your-writes either way).
   */
  changed(companyId: number, phone: string): void {
    this.dropNumber(String(companyId), phone);
  }

  /** No change of this number's claims or of the company's lists is being committed by this process (or was, a moment ago). */
  private claimsQuiet(companyId: number, phone: string): boolean {
    return this.listsQuiet(companyId) && !isChanging(CONTACTS_CHANGED_CHANNEL, `claim:${companyId}:${phone}`);
  }

  /** No change of the company's lists or custom fields is being committed by this process (or was, a moment ago). */
  private listsQuiet(companyId: number): boolean {
    return !isChanging(CONTACTS_CHANGED_CHANNEL, companyId) && !isChanging(CONTACTS_CHANGED_CHANNEL, '*');
  }

  /** No change of this number (any spelling) or company is being committed by this process (or was, a moment ago). */
  private quiet(companyId: number, variants: readonly string[]): boolean {
    if (isChanging(CONTACTS_CHANGED_CHANNEL, companyId) || isChanging(CONTACTS_CHANGED_CHANNEL, '*')) return false;
    for (const v of variants) if (isChanging(CONTACTS_CHANGED_CHANNEL, `${companyId}:${v}`)) return false;
    return true;
  }

  /** No notification for this number or its company arrived since invalidation number `seq`. */
  private untouchedSince(seq: number, companyId: number, key: string): boolean {
    if (this.seq === seq) return true;
    if (this.seq - seq > RECENT) return false;
    const company = String(companyId);
    for (let i = seq; i < this.seq; i++) {
      const k = this.recent[i % RECENT];
      if (k === key || k === company) return false;
    }
    return true;
  }

  private note(key: string): void {
    this.recent[this.seq % RECENT] = key;
    this.seq++;
  }

  private invalidate(payload: string): void {
    if (payload === '*') {
      this.clear();
      return;
    }
    if (payload.startsWith('claim:')) {
      this.note(payload);
      this.known.delete(payload.slice('claim:'.length));
      return;
    }
    const colon = payload.indexOf(':');
    if (colon < 0) {
      this.note(payload);
      const prefix = `${payload}:`;
      for (const key of this.entries.keys()) if (key.startsWith(prefix)) this.entries.delete(key);
      for (const key of this.known.keys()) if (key.startsWith(prefix)) this.known.delete(key);
      for (const key of this.lists.keys()) if (key.startsWith(prefix)) this.lists.delete(key);
      return;
    }
    this.dropNumber(payload.slice(0, colon), payload.slice(colon + 1));
  }

  /** Drops a number's entries, under every spelling of it. */
  private dropNumber(company: string, phone: string): void {
    for (const v of phoneVariants(phone)) {
      const key = `${company}:${v}`;
      this.note(key);
      this.entries.delete(key);
    }
  }

  private clear(): void {
    this.epoch++;
    this.entries.clear();
    this.known.clear();
    this.lists.clear();
  }
}

const caches = new WeakMap<FastifyInstance, ContactCache>();

/** The contact cache of an app (one LISTEN connection per app), started and stopped with it. */
export function contactCacheOf(app: FastifyInstance, pool: Pool): ContactCache {
  return appScoped(caches, app, () => new ContactCache(pool));
}
