import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { type AppOptions, buildApp } from '../../src/http/app';
import type { Services } from '../../src/services';
import { startWorkers, type Workers } from '../../src/workers';

// A `serve` assembled inside the test (services the test built, with its own pools, logger, provider): the read-model
// runner, the workers of the 'serve' role and the API app over real HTTP on a port the system picks; stopped in the
// order src/main.ts stops them.

export class ServedApp {
  app: FastifyInstance | undefined;
  workers: Workers | undefined;
  /** the app's URL (http://127.0.0.1:<port>) once started */
  base = '';

  constructor(readonly services: Services, private readonly transport: { close(): Promise<void> }) {}

  /**
   * Starts the runner, then `beforeWorkers` (a seed the workers must find, say), the workers and the app (with
   * `logger`), which listens on 127.0.0.1, port 0.
   */
  async start(options: { logger: AppOptions['logger']; beforeWorkers?: () => Promise<void> }): Promise<this> {
    await this.services.runner.start();
    await options.beforeWorkers?.();
    this.workers = await startWorkers(this.services, { role: 'serve' });
    this.app = await buildApp(this.services, { logger: options.logger });
    await this.app.listen({ port: 0, host: '127.0.0.1' });
    this.base = `http://127.0.0.1:${(this.app.server.address() as AddressInfo).port}`;
    return this;
  }

  /** Stops what started: the app, the workers, the runner, the transport and the event store (not the pools). */
  async stop(): Promise<void> {
    await this.app?.close();
    await this.workers?.stop();
    await this.services.runner.stop();
    await this.transport.close();
    await this.services.store.close();
  }
}
