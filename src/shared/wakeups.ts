// Waiters by id: each is woken by the next wake(id), or after its timeout (a change made by another process reaches
// no in-process waiter, so waiters look again on their own).
export class Wakeups {
  private readonly waiting = new Map<string, Set<() => void>>();

  /** resolves at the next wake(id) or after `ms`, whichever comes first */
  next(id: string, ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const set = this.waiting.get(id) ?? new Set();
      this.waiting.set(id, set);
      const done = () => {
        clearTimeout(timer);
        set.delete(done);
        if (set.size === 0 && this.waiting.get(id) === set) this.waiting.delete(id);
        resolve();
      };
      const timer = setTimeout(done, ms);
      set.add(done);
    });
  }

  wake(id: string): void {
    const set = this.waiting.get(id);
    if (!set) return;
    this.waiting.delete(id);
    for (const done of set) done();
  }
}
