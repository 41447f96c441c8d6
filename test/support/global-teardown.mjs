import { rmSync } from 'node:fs';

export default async function globalTeardown() {
  const state = globalThis.__switchboardTestState ?? {};
  if (state.kafka?.stop) await state.kafka.stop();
  if (state.pg) {
    await state.pg.stop();
    rmSync(state.pgDir, { recursive: true, force: true });
  }
}
