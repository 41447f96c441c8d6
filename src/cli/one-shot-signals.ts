import { constants } from 'node:os';
import { onStopSignals, type StopSignal } from './stop-signals';

// SIGTERM and SIGINT during a one-shot command (`seed`, `import-messages`, `projections rebuild`, ...). Without a
// listener Node's default action kills the process at once: the embedded Postgres it spawned stays running,
// orphaned (its exit hook never runs). Listening, the command stops what it started instead (docs/install.md,
// "Interrupting a one-shot command").

/** How long the stop after a signal may take before the process exits anyway (its exit hook still stops Postgres). */
export const INTERRUPT_STOP_MS = 10_000;

/** The shell's status for a process ended by `signal`: 128 + its number (SIGHUP 129, SIGINT 130, SIGTERM 143). */
export const signalExitCode = (signal: StopSignal): number => 128 + constants.signals[signal];

export interface StopSignals {
  /** whether a stop signal arrived: the command's own outcome no longer counts, the signal's stop exits */
  received(): boolean;
  /** a promise that never settles: what a command returns while the signal's stop runs to its exit */
  exiting(): Promise<never>;
  /** stops listening (the command has stopped what it started) */
  dispose(): void;
}

/**
 * The first SIGTERM or SIGINT prints `switchboard: interrupted by SIGNAL; <what is left and what to do>`, runs `stop`
 * (once) and exits 128 + the signal's number. A second signal (either one), or a stop that takes
 * longer than INTERRUPT_STOP_MS, exits at once with one more line; the exit hooks still stop the embedded Postgres.
 */
export function exitOnStopSignals(stop: () => Promise<void>, left: () => string): StopSignals {
  const write = (line: string) => process.stderr.write(`${process.stderr.isTTY ? '\r\x1b[2K' : ''}switchboard: ${line}\n`);
  const signals = onStopSignals({
    first: (signal) => {
      write(`interrupted by ${signal}; ${left()}`);
      void stop().catch(() => undefined).then(() => process.exit(signalExitCode(signal)));
    },
    again: (signal, first) => {
      write(`${signal} while stopping after ${first}; exiting without waiting for the stop`);
      process.exit(signalExitCode(signal));
    },
    forcedAfterMs: INTERRUPT_STOP_MS,
    forced: (signal) => {
      write(`the stop after ${signal} took longer than ${INTERRUPT_STOP_MS / 1000} s; exiting`);
      process.exit(signalExitCode(signal));
    },
  });
  return {
    received: () => signals.received() !== undefined,
    exiting: () => new Promise<never>(() => {}),
    dispose: signals.dispose,
  };
}
