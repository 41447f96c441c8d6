import { EventEmitter } from 'node:events';
import type { Pool } from 'pg';
import { type EventStore, type Position, START } from '../ports/event-store';
import { applyHandled, type Projection } from '../projections/projection';
import { ensureProjection, lockKeyOf, readCheckpoint, readCheckpoints } from '../projections/store';
import { rebuildProjection } from '../projections/rebuild';

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
}

export class ReadModelTimeoutError extends Error {
  override name = 'ReadModelTimeoutError';
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
  /** projections kicked while a batch was running: they look again before sleeping */
  private readonly kicked = new Set<string>();
  private readonly loops: Promise<void>[] = [];
  private running = false;
  private unsubscribe: (() => void) | undefined;
  private readonly batchSize: number;
  private readonly pollMs: number;

  constructor(
    private readonly pool: Pool,
    private readonly store: EventStore,
    readonly projections: readonly Projection[],
    private readonly options: ProjectionRunnerOptions = {},
  ) {
    this.batchSize = options.batchSize ?? 1000;
    this.pollMs = options.pollMs ?? 100;
    this.advanced.setMaxListeners(0);
    this.committed.setMaxListeners(0);
  }

  /** Creates missing read models (without advancing them). */
  async prepare(): Promise<void> {
    for (const p of this.projections) await ensureProjection(this.pool, p);
  }

  async start(): Promise<void> {
    await this.prepare();
    this.running = true;
    this.unsubscribe = this.store.onAppended(() => this.kick());
    for (const p of this.projections) this.loops.push(this.loop(p));
  }

  async stop(): Promise<void> {
    this.running = false;
    this.unsubscribe?.();
    this.kick();
    await Promise.allSettled(this.loops);
    this.loops.length = 0;
    await this.flushSkipped().catch((err) => this.options.logger?.warn({ err }, 'could not store skipped checkpoints'));
  }

  /** Stores how far projections read past events they do not handle (only where no one moved them since). */
  private async flushSkipped(): Promise<void> {
    for (const [name, s] of this.unpersisted) {
      await this.pool.query(`UPDATE projections.checkpoints SET position = $3, updated_at = now() WHERE name = $1 AND position = $2`, [name, s.storedAt, s.readTo]);
    }
    this.unpersisted.clear();
  }

  /** Called synchronously after this process commits a batch of a projection (before waiters resume). */
  onBatchCommitted(listener: (projection: string) => void): () => void {
    this.committed.on('committed', listener);
    return () => this.committed.off('committed', listener);
  }

  kick(): void {
    for (const p of this.projections) this.kicked.add(p.name);
    for (const wake of this.wakers.values()) wake();
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
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.advanced.off('advanced', done);
          resolve();
        };
        const timer = setTimeout(done, elsewhere ? 10 : 100);
        this.advanced.on('advanced', done);
      });
      if (elsewhere) {
        for (const cp of await readCheckpoints(this.pool)) this.positions.set(cp.name, cp.position);
      }
    }
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
        this.options.logger?.error({ err, projection: p.name }, 'projection batch failed');
        await this.recordFailure(p, err).catch(() => undefined);
        await sleep(Math.min(5000, 50 * 2 ** Math.min(failures, 7)));
        continue;
      }
      if (read > 0 && read >= this.batchSize) continue;
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
   * no transaction open (one connection at a time, whatever the number of projections); a batch with events to
   * apply then runs in a transaction holding the projection's lock, which re-checks that the checkpoint has not
   * moved meanwhile and stores the new one with the read-model change.
   */
  async runBatch(p: Projection): Promise<number> {
    this.kicked.delete(p.name);
    const cp = await readCheckpoint(this.pool, p.name);
    if (!cp) throw new Error(`projection ${p.name} has no checkpoint row`);
    if (cp.version !== p.version) {
      await this.rebuildForNewVersion(p, cp.version);
      return 0;
    }
    const skipped = this.unpersisted.get(p.name);
    const sameWindow = skipped !== undefined && skipped.storedAt === cp.position;
    const from = sameWindow ? skipped.readTo : (cp.position as Position);
    const batch = await this.store.readAll(from, this.batchSize);
    const handled = batch.events.some((e) => p.handles.includes(e.type));
    const overdue = sameWindow && Date.now() - skipped.since >= CHECKPOINT_EVERY_MS;
    if (!handled && !overdue) {
      // Nothing to apply: remember how far we read; the checkpoint is written with the next change (or soon).
      if (batch.events.length > 0) {
        this.unpersisted.set(p.name, { storedAt: cp.position as Position, readTo: batch.nextPosition, since: sameWindow ? skipped.since : Date.now() });
        this.positions.set(p.name, batch.nextPosition);
        this.advanced.emit('advanced');
      } else if (!this.positions.has(p.name) || !sameWindow) {
        this.positions.set(p.name, from);
      }
      return batch.events.length;
    }

    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const locked = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock(hashtext($1)) AS ok', [lockKeyOf(p.name)]);
      if (!locked.rows[0].ok) {
        await client.query('ROLLBACK');
        this.lockedElsewhere.add(p.name);
        return -1;
      }
      this.lockedElsewhere.delete(p.name);
      const current = await readCheckpoint(client, p.name);
      if (!current || current.position !== cp.position || current.version !== p.version) {
        await client.query('ROLLBACK'); // another process advanced it meanwhile: read again from there
        this.unpersisted.delete(p.name);
        return 0;
      }
      this.unpersisted.delete(p.name);
      // Derived data: rows and checkpoint commit together, so a batch lost in a server crash is re-applied
      // from the log. No need to wait for the WAL flush (event appends themselves stay synchronous).
      await client.query(`SET LOCAL synchronous_commit TO off; SET LOCAL search_path TO ${p.schema}, public`);
      await applyHandled(p, client, batch.events);
      await client.query(
        `UPDATE projections.checkpoints SET position = $2, state = 'running', error = NULL, updated_at = now() WHERE name = $1`,
        [p.name, batch.nextPosition],
      );
      await client.query('COMMIT');
      // Before waking read-your-writes waiters: in-process caches of this read model drop what they hold.
      if (batch.events.length > 0) this.committed.emit('committed', p.name);
      this.positions.set(p.name, batch.nextPosition);
      this.advanced.emit('advanced');
      return batch.events.length;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  /** Runs until every projection has applied everything appended so far (tests, CLI). */
  async catchUp(): Promise<void> {
    const head = await this.store.headPosition();
    if (head === START) return;
    for (const p of this.projections) {
      while (!this.hasPassed(p.name, head)) {
        const read = await this.runBatch(p);
        if (read === -1) await this.waitFor(head, [p]);
        else if (read === 0) await sleep(5); // an older transaction still holds readAll back
      }
    }
  }

  private async rebuildForNewVersion(p: Projection, from: number): Promise<void> {
    this.options.logger?.warn({ projection: p.name, from, to: p.version }, 'projection version changed: rebuilding');
    await rebuildProjection(this.pool, this.store, p, {});
  }

  private async recordFailure(p: Projection, err: unknown): Promise<void> {
    await this.pool.query(
      `UPDATE projections.checkpoints SET state = 'failing', error = $2, updated_at = now() WHERE name = $1`,
      [p.name, String((err as Error)?.message ?? err).slice(0, 2000)],
    );
  }
}
