import type { Position } from '../../ports/event-store';
import { START } from '../../ports/event-store';
import { readCheckpoints } from '../../projections/store';
import type { Services } from '../../services';

// Read-your-writes for provisioning, whether or not this process runs the projection runner (`serve` does, the
// CLI does not: its small pool cannot host the runner's loops): advance the read models here with `catchUp`
// (safe beside a running runner: projections advance under advisory locks) and check their checkpoints.

/** Brings every read model up to what is appended so far (commands that validate against read models). */
export async function readModelsUpToDate(services: Services): Promise<void> {
  await services.runner.catchUp();
}

/**
 * Returns once every read model handling one of `types` has applied everything up to `position`. (`catchUp`
 * alone may stop short: it reads the head below the oldest open transaction.)
 */
export async function awaitReadModels(services: Services, position: Position | undefined, types: readonly string[], timeoutMs = 60_000): Promise<void> {
  if (!position) return;
  const affected = services.runner.affectedBy(types).map((p) => p.name);
  if (affected.length === 0) return;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await services.runner.catchUp();
    const rows = (await readCheckpoints(services.pool)).filter((cp) => affected.includes(cp.name));
    const passed = rows.length === affected.length
      && rows.every((cp) => cp.position !== START && services.store.comparePositions(cp.position, position) >= 0);
    if (passed) return;
    if (Date.now() > deadline) throw new Error(`read models ${affected.join(', ')} did not reach ${position} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
