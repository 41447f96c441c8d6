import { schedule, type ScheduledTask } from 'node-cron';

/**
 * A periodic job on a cron expression (seconds field included), never overlapping itself. `run` gets a `stopping`
 * probe for long runs; `stop` ends the schedule and waits for a run in progress. `run` handles its own errors.
 */
export function startCronJob(name: string, expression: string, run: (stopping: () => boolean) => Promise<void>): { stop(): Promise<void> } {
  let stopping = false;
  let running: Promise<void> = Promise.resolve();
  const task: ScheduledTask = schedule(
    expression,
    () => {
      running = run(() => stopping);
      return running;
    },
    { name, noOverlap: true },
  );
  return {
    async stop() {
      stopping = true;
      await task.stop();
      await task.destroy();
      await running;
    },
  };
}
