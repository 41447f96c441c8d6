import type { FastifyInstance } from 'fastify';

interface Startable {
  start(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * One instance per app of something with a lifecycle (a cache and its LISTEN connection): created on first use,
 * started when the app is ready, stopped when it closes.
 */
export function appScoped<T extends Startable>(instances: WeakMap<FastifyInstance, T>, app: FastifyInstance, create: () => T): T {
  let instance = instances.get(app);
  if (!instance) {
    const created = create();
    app.addHook('onReady', () => created.start());
    app.addHook('onClose', () => created.stop());
    instances.set(app, created);
    instance = created;
  }
  return instance;
}
