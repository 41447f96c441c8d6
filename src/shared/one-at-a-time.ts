/**
 * `run` one at a time: a call while a run is in flight gets the next run, shared by every such call, so what a call
 * gets never started before it (a run in flight may have taken its snapshot, or read its answer, before the call).
 */
export function oneAtATime(run: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  let next: Promise<void> | undefined;
  const call = (): Promise<void> => {
    if (running) {
      next ??= running.then(() => {
        next = undefined;
        return call();
      });
      return next;
    }
    running = run().finally(() => (running = undefined));
    return running;
  };
  return call;
}
