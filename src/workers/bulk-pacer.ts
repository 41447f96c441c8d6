// Pacing of one number's sends: start times spaced by the tier's spacing, with a backoff when the provider
// asks to slow down.

const CATCH_UP_MS = 50;

/** Start times of sends on one number, spaced by the tier's spacing. */
export class Pacer {
  private next: number;
  private started = false;

  /**
   * `notBefore`: the number's next send slot left by the previous pacer of this number (the last send plus the
   * spacing, or a provider backoff), so pacing holds from one task (or bulk) of the number to the next.
   */
  constructor(
    private readonly spacingMs: number,
    private readonly now: () => number,
    private readonly sleep: (ms: number) => Promise<void>,
    notBefore = Number.NEGATIVE_INFINITY,
  ) {
    this.next = notBefore;
  }

  /** When the next send may start (ms since the epoch; -Infinity while nothing holds the number). */
  get nextSlotMs(): number {
    return this.next;
  }

  async wait(): Promise<void> {
    if (this.spacingMs <= 0 && this.next === Number.NEGATIVE_INFINITY) return;
    let t = this.now();
    const ahead = this.next - t;
    // below a millisecond no timer is precise: send now, the debt carries over to the next slot
    if (ahead >= 1) {
      await this.sleep(ahead);
      t = this.now();
    }
    // Spacings under 10 ms are below timer precision and shorter than a window's database work: up to
    // CATCH_UP_MS of late slots may be caught up, so the rate holds on average. Longer spacings are never shortened.
    // A pacer's first send catches nothing up (a slot left by an earlier pacer is a floor, not a debt).
    const floor = this.started ? t - (this.spacingMs < 10 ? CATCH_UP_MS : 0) : t;
    this.started = true;
    this.next = Math.max(this.next, floor) + this.spacingMs;
  }

  /** Nothing starts before `ms` from now (the provider asked to slow down). */
  backoff(ms: number): void {
    this.next = Math.max(this.next, this.now() + ms);
  }
}
