import { EventEmitter } from 'node:events';
import type { Pool, PoolClient } from 'pg';
import { StatisticsKeeper } from '../projections/statistics';
import { type EventStore, type Position, type ReadAllBatch, type RecordedEvent, START } from '../ports/event-store';
import { applyHandled, appliesTo, type LogReader, type Projection, upcastingReader, upToUnreadable } from '../projections/projection';
import { ensureProjection, readCheckpoint, readCheckpoints } from '../projections/store';
import { clearInterruptedRebuild, rebuildForVersionChange } from '../projections/rebuild';
import { ReadModelTimeoutError } from '../ports/read-models';
import { literal, type OpenedRow, openedRow, openingStatement } from './projection-batch-sql';
import { type ReadSizing, SharedLogReader } from './shared-log-reader';

export interface RunnerLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface ProjectionRunnerOptions {
  batchSize?: number;
  /** how often an idle runner looks for work appended by other processes (in-process appends wake it at once) */
  pollMs?: number;
  logger?: RunnerLogger;
  /**
   * The event registry's upcast (which validates), when `store` is the adapter itself: each event is upcast on its
   * own, and one that cannot be (its schema refuses it) stalls only the projections that handle its type (failing,
   * before it), not every projection's reads. Without it `store` is read as it is (a validating store fails the
   * read of any batch holding such an event, for every projection).
   */
  upcast?: (event: RecordedEvent) => RecordedEvent;
}


/**
 * A projection's reads of the log: the size of those made for it alone (ReadSizing: behind or ahead of the tail),
 * and `full`, its last read was full (more may follow at once: it reads on before sleeping).
 */
interface ProjectionReads extends ReadSizing {
  full: boolean;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** how long a projection may go without persisting a checkpoint that only skipped events it does not handle */
const CHECKPOINT_EVERY_MS = 1000;

/**
 * Advances every projection from its checkpoint. Each batch runs in one transaction that holds the
 * projection's advisory lock, applies the events and stores the new checkpoint, so exactly one process
 * advances a projection at a time and an event is applied once in effect, even across crashes.
 */
export class ProjectionRunner {
  private readonly positions = new Map<string, Position>();
  private readonly lockedElsewhere = new Set<string>();
  private readonly advanced = new EventEmitter();
  private readonly committed = new EventEmitter();
  private readonly wakers = new Map<string, () => void>();
  /**
   * Read past events the projection does not handle, without writing its checkpoint yet: valid only while the
   * stored checkpoint is still `storedAt` (no other process advanced it meanwhile).
   */
  private readonly unpersisted = new Map<string, { storedAt: Position; readTo: Position; since: number }>();
  /**
   * A transaction opened for a projection's next batch by the commit of its previous one (same round trip), when
   * the tail already held more events for it: the client, and what the opening statement returned.
   */
  private readonly preopened = new Map<string, { client: PoolClient; current: OpenedRow | undefined }>();
  /** the checkpoint each projection last stored, as this process knows it (verified under the lock) */
  private readonly stored = new Map<string, { position: Position; version: number }>();
  /** the log as far as this runner read it last (shared by the projections); its `readEpoch` moves on every kick */
  private readonly log: SharedLogReader;
  /** projections kicked while a batch was running: they look again before sleeping */
  private readonly kicked = new Set<string>();
  /** each projection's reads: their size (SharedLogReader), and whether the last was full */
  private readonly reads = new Map<string, ProjectionReads>();
  private wakeScheduled = false;
  private readonly loops: Promise<void>[] = [];
  private running = false;
  private unsubscribe: (() => void) | undefined;
  private readonly batchSize: number;
  private readonly pollMs: number;
  private readonly statistics: StatisticsKeeper;
  /** the log as the projections read it (upcast per event with `options.upcast`): rebuilds read it too */
  readonly reader: LogReader;

  constructor(
    private readonly pool: Pool,
    private readonly store: EventStore,
    readonly projections: readonly Projection[],
    private readonly options: ProjectionRunnerOptions = {},
  ) {
    this.batchSize = options.batchSize ?? 1000;
    this.pollMs = options.pollMs ?? 100;
    this.reader = options.upcast ? upcastingReader(store, options.upcast) : store;
    this.log = new SharedLogReader(this.reader, this.batchSize, this.pollMs);
    // young read models keep current statistics (the event store's statements run on generic plans, see main.ts)
    this.statistics = new StatisticsKeeper(pool, projections.map((p) => p.schema), { logger: options.logger });
    this.advanced.setMaxListeners(0);
    this.committed.setMaxListeners(0);
  }

  /** Creates missing read models (without advancing them). */
  async prepare(): Promise<void> {
    for (const p of this.projections) await ensureProjection(this.pool, p);
  }

  async start(): Promise<void> {
    await this.prepare();
    await this.clearInterruptedRebuilds();
    this.running = true;
    this.unsubscribe = this.store.onAppended(() => this.kick());
    for (const p of this.projections) this.loops.push(this.loop(p));
    this.statistics.start();
  }

  /** Drops what rebuilds stopped before their swap left (a killed `projections rebuild`, a killed process's version change). */
  private async clearInterruptedRebuilds(): Promise<void> {
    for (const p of this.projections) {
      if (await clearInterruptedRebuild(this.pool, p)) {
        this.options.logger?.warn({ projection: p.name }, "an interrupted rebuild's partial tables were dropped");
      }
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    this.unsubscribe?.();
    await this.statistics.stop();
    this.kick();
    await Promise.allSettled(this.loops);
    this.loops.length = 0;
    for (const name of [...this.preopened.keys()]) await this.discardPreopened(name).catch(() => undefined);
    await this.flushSkipped().catch((err) => this.options.logger?.warn({ err }, 'could not store skipped checkpoints'));
  }

  /** Stores how far projections read past events they do not handle (only where no one moved them since). */
  private async flushSkipped(): Promise<void> {
    for (const [name, s] of this.unpersisted) {
      await this.pool.query(`UPDATE projections.checkpoints SET position = $3, updated_at = now() WHERE name = $1 AND position = $2`, [name, s.storedAt, s.readTo]);
      this.stored.delete(name);
    }
    this.unpersisted.clear();
  }

  /** Called synchronously after this process commits a batch of a projection (before waiters resume). */
  onBatchCommitted(listener: (projection: string, events: readonly RecordedEvent[]) => void): () => void {
    this.committed.on('committed', listener);
    return () => this.committed.off('committed', listener);
  }

  kick(): void {
    this.log.readEpoch++;
    for (const p of this.projections) this.kicked.add(p.name);
    // Sleeping loops are woken once per turn of the event loop, after its I/O callbacks: the appends that
    // completed in the same turn wake each loop once, not once each.
    if (this.wakeScheduled || this.wakers.size === 0) return;
    this.wakeScheduled = true;
    setImmediate(() => {
      this.wakeScheduled = false;
      for (const wake of this.wakers.values()) wake();
    });
  }

  /** Read-your-writes: resolves once every given projection has applied everything up to `position`. */
  async waitFor(position: Position, projections: readonly Projection[] = this.projections, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    this.kick();
    for (;;) {
      const behind = projections.filter((p) => !this.hasPassed(p.name, position));
      if (behind.length === 0) return;
      if (Date.now() > deadline) {
        throw new ReadModelTimeoutError(`read models ${behind.map((p) => p.name).join(', ')} did not reach ${position} in time`);
      }
      const elsewhere = !this.running || behind.some((p) => this.lockedElsewhere.has(p.name));
      // Woken on every projection's advance: only a check (no new timer and listener each time), done once all
      // the projections it waits for have passed, or at the timer (to look at the deadline and at other processes).
      await new Promise<void>((resolve) => {
        let waiting = behind;
        const check = () => {
          waiting = waiting.filter((p) => !this.hasPassed(p.name, position));
          if (waiting.length === 0) done();
        };
        const done = () => {
          clearTimeout(timer);
          this.advanced.off('advanced', check);
          resolve();
        };
        const timer = setTimeout(done, elsewhere ? 10 : 100);
        this.advanced.on('advanced', check);
      });
      if (elsewhere) {
        for (const cp of await readCheckpoints(this.pool)) this.positions.set(cp.name, cp.position);
      }
    }
  }

  /** The projections of these names (unknown names are a programming error). */
  named(names: readonly string[]): Projection[] {
    const found = this.projections.filter((p) => names.includes(p.name));
    if (found.length !== new Set(names).size) throw new Error(`unknown projection among ${names.join(', ')}`);
    return found;
  }

  /** The projections that handle any of these event types (what a command must wait for). */
  affectedBy(types: readonly string[]): Projection[] {
    return this.projections.filter((p) => types.some((t) => p.handles.includes(t)));
  }

  async waitForEvents(position: Position | undefined, types: readonly string[], timeoutMs?: number): Promise<void> {
    if (!position) return;
    await this.waitFor(position, this.affectedBy(types), timeoutMs);
  }

  private hasPassed(name: string, position: Position): boolean {
    const at = this.positions.get(name);
    return at !== undefined && at !== START && this.store.comparePositions(at, position) >= 0;
  }

  private async loop(p: Projection): Promise<void> {
    let failures = 0;
    while (this.running) {
      let read: number;
      try {
        read = await this.runBatch(p);
        failures = 0;
      } catch (err) {
        failures++;
        // a transaction the last commit opened for this batch is not kept (with the projection's lock) while it waits
        await this.discardPreopened(p.name).catch(() => undefined);
        // The checkpoint is read again for the retry, and the failure recorded only where this process failed: another
        // process may have moved the projection on meanwhile (during a rolling upgrade, the version that can read an
        // event this one cannot). Before (regression review 12) this process retried from where it had failed for ever,
        // its read-your-writes waits timed out, and it marked the projection failing again after the other's commits.
        const failedAt = this.stored.get(p.name)?.position;
        this.stored.delete(p.name);
        this.options.logger?.error({ err, projection: p.name }, 'projection batch failed');
        await this.recordFailure(p, err, failedAt).catch(() => undefined);
        await sleep(Math.min(5000, 50 * 2 ** Math.min(failures, 7)));
        continue;
      }
      // reads are sized by their events (SharedLogReader): a full one may hold fewer than batchSize
      if (read > 0 && (read >= this.batchSize || this.reads.get(p.name)?.full)) continue;
      if (this.preopened.has(p.name)) continue; // the next batch's transaction is open: run it now
      if (this.kicked.delete(p.name)) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(finish, this.pollMs);
        const wake = () => finish();
        this.wakers.set(p.name, wake);
        function finish() {
          clearTimeout(timer);
          resolve();
        }
      });
      this.wakers.delete(p.name);
    }
  }

  /**
   * One batch: events read, or -1 when another process holds the projection. The events are read first, with
   * no transaction open, and shared by the projections that read from the same position at the same time (one
   * query for all of them, whatever their number). A batch with events to apply then runs in a transaction
   * holding the projection's lock, which re-checks that the checkpoint has not moved meanwhile and stores the new
   * one with the read-model change: three round trips plus the projection's own statements (two when the previous
   * batch's commit opened it).
   */
  async runBatch(p: Projection, retried = false): Promise<number> {
    this.kicked.delete(p.name);
    const cp = this.stored.get(p.name) ?? (await this.loadCheckpoint(p));
    if (cp.version !== p.version) return this.rebuildForNewVersion(p, cp.version);
    const skipped = this.unpersisted.get(p.name);
    const sameWindow = skipped !== undefined && skipped.storedAt === cp.position;
    const from = sameWindow ? skipped.readTo : cp.position;
    let reads = this.reads.get(p.name);
    if (!reads) this.reads.set(p.name, (reads = { size: 1, full: false }));
    const read = await this.log.readShared(from, reads);
    if (read.stale) this.kicked.add(p.name); // newer events may exist: look again before sleeping
    reads.full = read.full;
    const batch = await this.beforeUnreadable(p, read.batch);
    const handled = batch.events.some((e) => appliesTo(p, e));
    const overdue = sameWindow && Date.now() - skipped.since >= CHECKPOINT_EVERY_MS;
    if (!handled && !overdue) {
      await this.discardPreopened(p.name);
      // Nothing to apply: remember how far we read; the checkpoint is written with the next change (or soon).
      if (batch.events.length > 0) {
        this.unpersisted.set(p.name, { storedAt: cp.position, readTo: batch.nextPosition, since: sameWindow ? skipped.since : Date.now() });
        this.positions.set(p.name, batch.nextPosition);
        this.advanced.emit('advanced');
      } else if (!this.positions.has(p.name) || !sameWindow) {
        this.positions.set(p.name, from);
      }
      return batch.events.length;
    }
    const applied = await this.commitBatch(p, cp, batch);
    return applied === 'moved' ? (retried ? 0 : this.runBatch(p, true)) : applied;
  }

  /** `upToUnreadable` of `p`'s types; a transaction the last commit opened is not kept when it fails. */
  private async beforeUnreadable(p: Projection, batch: ReadAllBatch): Promise<ReadAllBatch> {
    try {
      return upToUnreadable(batch, (e) => p.handles.includes(e.type));
    } catch (err) {
      await this.discardPreopened(p.name);
      throw err;
    }
  }

  /**
   * Applies a batch under the projection's lock: events applied, -1 when locked elsewhere, 'moved' when the
   * checkpoint moved. Three round trips (open, apply, commit), two when the previous commit opened this
   * transaction already.
   */
  private async commitBatch(p: Projection, cp: { position: Position; version: number }, batch: ReadAllBatch): Promise<number | 'moved'> {
    const pre = this.preopened.get(p.name);
    this.preopened.delete(p.name);
    const client = pre?.client ?? (await this.pool.connect());
    let keep = false;
    try {
      const name = literal(p.name);
      const current = pre ? pre.current : openedRow(await client.query(`BEGIN; ${openingStatement(p)}`));
      if (!current) throw new Error(`projection ${p.name} has no checkpoint row`);
      if (!current.ok) {
        await client.query('ROLLBACK');
        this.lockedElsewhere.add(p.name);
        this.stored.delete(p.name); // another process advances it: reload the checkpoint next time
        return -1;
      }
      this.lockedElsewhere.delete(p.name);
      if (current.position !== cp.position || current.version !== cp.version) {
        // another process (or a flush of skipped events) moved it meanwhile: read again from there
        await client.query('ROLLBACK');
        this.stored.set(p.name, { position: current.position, version: current.version });
        this.unpersisted.delete(p.name);
        return 'moved';
      }
      this.unpersisted.delete(p.name);
      await applyHandled(p, client, batch.events);
      // The tail already holds events for this projection after the batch: the commit opens the next batch's
      // transaction in the same round trip (its lock is taken at once, so it is not held while idle).
      const openNext = this.running && this.log.tail.hasAfter(batch.nextPosition, (e) => appliesTo(p, e));
      const closed = await client.query(
        `UPDATE projections.checkpoints SET position = ${literal(batch.nextPosition)}, state = 'running', error = NULL, updated_at = now()
          WHERE name = ${name}; COMMIT${openNext ? `; BEGIN; ${openingStatement(p)}` : ''}`,
      );
      if (openNext) {
        this.preopened.set(p.name, { client, current: openedRow(closed) });
        keep = true;
      }
      this.stored.set(p.name, { position: batch.nextPosition, version: p.version });
      // Before waking read-your-writes waiters: in-process caches of this read model drop what they hold.
      if (batch.events.length > 0) this.committed.emit('committed', p.name, batch.events);
      this.positions.set(p.name, batch.nextPosition);
      this.advanced.emit('advanced');
      // This transaction may have held back readAll (its id was below events committed meanwhile): projections
      // that found nothing look again now rather than at their next poll, when someone is waiting for them.
      if (this.advanced.listenerCount('advanced') > 0) this.kick();
      return batch.events.length;
    } catch (err) {
      keep = false;
      this.preopened.delete(p.name);
      await client.query('ROLLBACK').catch(() => undefined);
      this.stored.delete(p.name);
      throw err;
    } finally {
      if (!keep) client.release();
    }
  }

  /** Ends a transaction opened for a batch that will not run (nothing to apply after all, a rebuild, a stop). */
  private async discardPreopened(name: string): Promise<void> {
    const pre = this.preopened.get(name);
    if (!pre) return;
    this.preopened.delete(name);
    try {
      await pre.client.query('ROLLBACK');
    } finally {
      pre.client.release();
    }
  }

  private async loadCheckpoint(p: Projection): Promise<{ position: Position; version: number }> {
    const row = await readCheckpoint(this.pool, p.name);
    if (!row) throw new Error(`projection ${p.name} has no checkpoint row`);
    const cp = { position: row.position as Position, version: row.version };
    this.stored.set(p.name, cp);
    return cp;
  }

  /**
   * Runs until every given projection (all by default) has applied everything appended so far (tests, CLI), or
   * until `deadline` (epoch ms): false when it gave up there, behind the head (an older transaction holding readAll
   * back, or another process holding a projection). A caller that reads some read models names them: the others
   * may be in a version change's rebuild, which it would otherwise wait for (or run itself) to the end.
   */
  async catchUp(deadline = Number.POSITIVE_INFINITY, projections: readonly Projection[] = this.projections): Promise<boolean> {
    const head = await this.store.headPosition();
    if (head === START) return true;
    for (const p of projections) {
      while (!this.hasPassed(p.name, head)) {
        if (Date.now() >= deadline) return false;
        const read = await this.runBatch(p);
        if (read === -1) await this.waitForHolder(p, head, deadline);
        else if (read === 0) await sleep(5); // an older transaction still holds readAll back
      }
    }
    return true;
  }

  /** Another process holds the projection: waits for it to pass `head` (10 s at most, as ever), or to the deadline. */
  private async waitForHolder(p: Projection, head: Position, deadline: number): Promise<void> {
    const left = deadline - Date.now();
    try {
      await this.waitFor(head, [p], Math.min(10_000, left));
    } catch (err) {
      // with a deadline, the loop goes on until it (and then says why); without one, as ever, 10 s and the error
      if (!(err instanceof ReadModelTimeoutError) || deadline === Number.POSITIVE_INFINITY) throw err;
    }
  }

  /**
   * 0 once the projection was rebuilt, here or by another process; -1 while another process rebuilds it (the old
   * tables keep serving; the next batch asks again).
   */
  private async rebuildForNewVersion(p: Projection, from: number): Promise<number> {
    await this.discardPreopened(p.name);
    this.stored.delete(p.name); // read again next time, whatever happens here
    const outcome = await rebuildForVersionChange(this.pool, this.reader, p, () =>
      this.options.logger?.warn({ projection: p.name, from, to: p.version }, 'projection version changed: rebuilding'));
    if (outcome !== 'busy') return 0;
    this.lockedElsewhere.add(p.name);
    return -1;
  }

  /** Records the failure, unless the checkpoint has moved from `at` (where this process failed) meanwhile. */
  private async recordFailure(p: Projection, err: unknown, at?: Position): Promise<void> {
    await this.pool.query(
      `UPDATE projections.checkpoints SET state = 'failing', error = $2, updated_at = now()
        WHERE name = $1 AND ($3::text IS NULL OR position = $3::text)`,
      [p.name, String((err as Error)?.message ?? err).slice(0, 2000), at ?? null],
    );
  }
}
