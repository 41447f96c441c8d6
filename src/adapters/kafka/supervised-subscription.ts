// Supervision of one Kafka subscription: keeps a consumer running, retrying its start with backoff and
// replacing it after a crash that kafkajs will not restart by itself.
import type { Subscription } from '../../ports/transport';
import type { KafkaSubscription } from './kafka-subscription';

/** Keeps one consumer running for a subscription: retries its start and replaces it after a fatal crash. */
export class SupervisedSubscription implements Subscription {
  onStopped: () => void = () => {};
  private current: KafkaSubscription | undefined;
  /** the start in progress (never rejects): stop() waits for it, so a consumer created meanwhile is stopped too */
  private starting: Promise<void> | undefined;
  private stopped = false;
  private stopping: Promise<void> | undefined;
  private attempts = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly create: (onFatalCrash: () => void) => Promise<KafkaSubscription>,
    private readonly onRetry: (err: unknown, attempt: number, delayMs: number) => void,
  ) {}

  start(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (!this.starting) {
      this.starting = this.startOnce().finally(() => (this.starting = undefined));
    }
    return this.starting;
  }

  private async startOnce(): Promise<void> {
    let created: KafkaSubscription | undefined;
    // kafkajs reports a crash while joining the group (e.g. a session timeout the broker refuses) from inside
    // run(), before create() returns: that consumer is dead, it must neither become current nor reset the backoff
    let crashedWhileStarting = false;
    try {
      created = await this.create(() => (created ? this.crashed(created) : (crashedWhileStarting = true)));
    } catch (err) {
      this.schedule(err);
      return;
    }
    if (this.stopped || crashedWhileStarting) {
      // stopped meanwhile, or already crashed: it must not keep running
      await created.stop().catch(() => undefined);
      if (crashedWhileStarting) this.schedule(new Error('consumer crashed while starting and was not restarted by kafkajs'));
      return;
    }
    this.current = created;
    this.attempts = 0;
  }

  private crashed(sub: KafkaSubscription | undefined): void {
    if (sub && this.current !== sub) {
      // not (or no longer) the running consumer: just make sure it is gone
      void sub.stop().catch(() => undefined);
      if (this.current !== undefined || this.starting) return;
    }
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

  stop(): Promise<void> {
    if (!this.stopping) {
      this.stopped = true;
      clearTimeout(this.timer);
      this.stopping = (async () => {
        try {
          await this.starting; // a consumer being created is stopped by startOnce once it exists
          const current = this.current;
          this.current = undefined;
          await current?.stop();
        } finally {
          this.onStopped();
        }
      })();
    }
    return this.stopping;
  }
}
