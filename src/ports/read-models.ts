// Read-your-writes, as the commands see it: the projection runner (src/workers/projection-runner.ts) implements
// these; a command waits through them and never imports the runner.
import type { Position } from './event-store';
import type { Projection } from '../projections/projection';

/** A read model did not reach a position in time (the write happened; the answer cannot show it yet). */
export class ReadModelTimeoutError extends Error {
  override name = 'ReadModelTimeoutError';
}

/** Waits until the projections fed by these event types have applied everything up to `position`. */
export interface ReadModelWaiter {
  waitForEvents(position: Position | undefined, types: readonly string[], timeoutMs?: number): Promise<void>;
}

/** Drives one projection directly (a CLI process that holds no runner loop catches a read model up itself). */
export interface ProjectionDriver {
  /** one batch: events applied, 0 when there were none, -1 when another process holds the projection */
  runBatch(projection: Projection): Promise<number>;
  waitFor(position: Position, projections?: readonly Projection[], timeoutMs?: number): Promise<void>;
}
