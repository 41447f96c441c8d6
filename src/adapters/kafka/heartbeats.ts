// Heartbeats of one partition batch. kafkajs heartbeats only when the consumer loop asks it to, and learns of a
// rebalance (or that this member was dropped) only from a heartbeat's error; it rejoins only once that error leaves
// eachBatch.

/**
 * `beat()` between records; `during(fn)` keeps beating in the background while a handler runs, so a handler slower
 * than the session timeout does not get its member dropped and its partition handed to another member while its
 * records are still being handled (the other member would handle them again, at the same time, and the late one's
 * result would land after the newer one's). Background beats go on after a failed one: a member that answers
 * heartbeats stays in the group while it finishes the record in flight, and the rebalance waits for it (up to the
 * rebalance timeout). After a failed beat `lost()` holds: the batch stops where it is (committing what is done),
 * then `rethrow()` hands the error to kafkajs.
 */
export function heartbeats(heartbeat: () => Promise<void>, backgroundEveryMs: number) {
  let error: { err: unknown } | undefined;
  let inFlight: Promise<void> | undefined;
  const send = (): Promise<void> => {
    // kafkajs sends a heartbeat only once its interval has passed since the last one: calling often is cheap
    inFlight ??= heartbeat()
      .catch((err: unknown) => {
        error ??= { err };
      })
      .finally(() => (inFlight = undefined));
    return inFlight;
  };
  return {
    async beat(): Promise<void> {
      if (!error) await send();
    },
    async during<T>(fn: () => Promise<T>): Promise<T> {
      const timer = setInterval(() => void send(), backgroundEveryMs);
      try {
        return await fn();
      } finally {
        clearInterval(timer);
      }
    },
    lost: () => error !== undefined,
    rethrow(): void {
      if (error) throw error.err;
    },
  };
}

export type Heartbeats = ReturnType<typeof heartbeats>;
