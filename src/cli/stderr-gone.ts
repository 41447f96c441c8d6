// stderr is where every command says what happened: an interruption's line, a failure's line, its log. Its reader can
// go away first: a caller that gives up on the command closes its end of the pipe (spawnSync does on its timeout,
// then signals SIGTERM), a pipeline's reader exits, a terminal closes. The next line written was an 'error' event
// (EPIPE, EIO) that nobody listened for: an uncaught exception whose report could not be written either, so the
// process exited 1 at once, saying nothing, in the middle of its stop (docs/install.md, "Start-up errors": seen as a
// `projections rebuild` that exited 1 with no output when the test's 120-s bound on it ran out under load).
// With nobody left to read it, nothing more can be told: the command goes on to its stop and exits with its own status.

/**
 * Keeps a write error on stderr from ending the process: each later line is dropped the same way. (The one-shot
 * commands' log output on fd 2, pino.destination, drops its lines after an EPIPE by itself.)
 */
export function surviveClosedStderr(stderr: NodeJS.WriteStream = process.stderr): void {
  stderr.on('error', () => undefined);
}
