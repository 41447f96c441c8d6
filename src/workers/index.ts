import type { Services } from '../services';
import { startDeliveryConsumer } from './delivery-consumer';
import { startConversationConsumer } from './conversation-consumer';
import { startBulkDispatcher } from './bulk-dispatcher';
import { startBulkLeaseCron } from './bulk-lease-cron';
import { startWebhookFanOut } from './webhook-fanout';
import { startWebhookSender } from './webhook-sender';
import { startWebhookRetention } from './webhook-retention';
import { startStuckListenerWatch } from './stuck-listeners';

export interface Workers {
  /** stops taking work, lets in-flight work finish, commits offsets */
  stop(): Promise<void>;
}

export interface WorkerOptions {
  role: 'serve' | 'worker';
}

type Stoppable = { stop(): Promise<void> };

// Long-running loops besides the projection runner, one line per worker. Add new workers here.
const workerFactories: Array<(services: Services, options: WorkerOptions) => Promise<Stoppable>> = [
  (services) => startDeliveryConsumer(services),
  (services) => startConversationConsumer(services),
  async (services) => startBulkDispatcher(services),
  async (services) => startBulkLeaseCron(services),
  async (services) => startWebhookFanOut(services),
  async (services) => startWebhookSender(services),
  async (services) => startWebhookRetention(services),
  async (services) => startStuckListenerWatch(services),
];

export async function startWorkers(services: Services, options: WorkerOptions): Promise<Workers> {
  const started: Stoppable[] = [];
  try {
    for (const start of workerFactories) started.push(await start(services, options));
  } catch (err) {
    await Promise.allSettled(started.map((w) => w.stop()));
    throw err;
  }
  return {
    async stop() {
      await Promise.allSettled(started.reverse().map((w) => w.stop()));
    },
  };
}
