// `npm start` runs `serve` under `sh -c`, and npm passes a SIGTERM it receives to that shell only: the shell dies, npm
// exits, and `serve` (re-parented) kept running and serving with its Postgres, with nobody left to stop it. Under
// npm (`npm_lifecycle_event` set) `serve` and `worker` watch their parent: once it is gone they stop as on SIGTERM.
// Started some other way (a supervisor, the Docker image, a shell's `&`), a parent's exit changes nothing.

/** How often the parent is looked at: a stop follows the launcher's within about this long. */
export const LAUNCHER_POLL_MS = 500;

/** Calls `gone` once, when the process that launched this one under npm has exited; returns the stop of the watch. */
export function whenNpmLauncherGone(gone: () => void, env: NodeJS.ProcessEnv = process.env): () => void {
  if (!env.npm_lifecycle_event) return () => undefined;
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    gone();
  }, LAUNCHER_POLL_MS);
  timer.unref();
  return () => clearInterval(timer);
}
