// Supervision of one Kafka subscription: keeps a consumer running, retrying its start with backoff and
// replacing it after a crash that kafkajs will not restart by itself.
import type { Subscription } from '../../ports/transport';
import type { KafkaSubscription } from './kafka-subscription';

/** Keeps one consumer running for a subscription: retries its start and replaces it after a fatal crash. */
export class SupervisedSubscription implements Subscription {
  onStopped: () => void = () => {};
  private current: KafkaSubscription | undefined;
  private stopped = false;
  private attempts = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly create: (onFatalCrash: () => void) => Promise<KafkaSubscription>,
    private readonly onRetry: (err: unknown, attempt: number, delayMs: number) => void,
  ) {}

  async start(): Promise<void> {
    if (this.stopped) return;
    try {
      this.current = await this.create(() => this.crashed());
      this.attempts = 0;
    } catch (err) {
      this.schedule(err);
    }
  }

  private crashed(): void {
    const old = this.current;
    this.current = undefined;
    void old?.stop().catch(() => undefined);
    this.schedule(new Error('consumer crashed and was not restarted by kafkajs'));
  }

  private schedule(err: unknown): void {
    if (this.stopped) return;
    this.attempts += 1;
    const delay = Math.min(30_000, 500 * 2 ** Math.min(this.attempts - 1, 6));
    this.onRetry(err, this.attempts, delay);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.start(), delay);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    try {
      await this.current?.stop();
    } finally {
      this.onStopped();
    }
  }
}
