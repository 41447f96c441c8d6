// The stop signals of every command (`serve`, `worker` and the one-shot ones). SIGHUP: the terminal closed; without a
// listener each of them killed the process by the default action and left the embedded Postgres running.
export const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const;
export type StopSignal = (typeof STOP_SIGNALS)[number];

export interface StopSignalHandlers {
  /** the first signal: begin the stop */
  first(signal: StopSignal): void;
  /** any later signal (either one), during the stop: exit at once */
  again(signal: StopSignal, first: StopSignal): void;
  /** the stop still running `forcedAfterMs` after the first signal: exit at once */
  forced(first: StopSignal): void;
  forcedAfterMs: number;
}

/** Listens for the stop signals until `dispose`; `received` is the first one, once one came. */
export function onStopSignals(handlers: StopSignalHandlers): { received(): StopSignal | undefined; dispose(): void } {
  let first: StopSignal | undefined;
  const onSignal = (signal: StopSignal) => {
    if (first !== undefined) return handlers.again(signal, first);
    first = signal;
    const firstSignal = signal;
    setTimeout(() => handlers.forced(firstSignal), handlers.forcedAfterMs).unref();
    handlers.first(signal);
  };
  for (const s of STOP_SIGNALS) process.on(s, onSignal);
  return {
    received: () => first,
    dispose: () => {
      for (const s of STOP_SIGNALS) process.removeListener(s, onSignal);
    },
  };
}
