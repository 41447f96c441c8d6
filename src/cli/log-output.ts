import type { DestinationStream } from 'pino';

/** Log output held for a stdout that is not being read; lines past it are dropped (and counted, in one line) until it drains. */
export const MAX_PENDING_LOG_BYTES = 1024 * 1024;

/**
 * stdout as `serve` and `worker` log to it: a write error (a closed terminal: EIO; a reader that went away: EPIPE) ends
 * the logging, never the process, and a stdout that is not being read (a full pipe, a stalled terminal) neither blocks
 * the event loop nor holds the exit. pino's default output (sonic-boom on fd 1) threw on EIO and, at exit, retried its
 * unwritten lines forever, so such a process stopped answering signals and never stopped its embedded Postgres.
 */
export interface ServiceLogOutput extends DestinationStream {
  /** Before the exit: the lines still held go out to a reader that is behind, waiting at most `ms`. */
  drain(ms: number): Promise<void>;
}

export function serviceLogOutput(stdout: NodeJS.WriteStream = process.stdout): ServiceLogOutput {
  let failed = false;
  // also covers the process's other stdout writes (the listening line, the demo key)
  stdout.on('error', () => (failed = true));
  // Node writes to a terminal synchronously: one that stopped reading would stop the event loop (signals included)
  if (stdout.isTTY) (stdout as unknown as { _handle?: { setBlocking?(blocking: boolean): void } })._handle?.setBlocking?.(false);
  let dropped = 0;
  return {
    write(line: string) {
      if (failed) return;
      if (stdout.writableLength > MAX_PENDING_LOG_BYTES) {
        dropped += 1;
        return;
      }
      sayDropped();
      stdout.write(line);
    },
    drain(ms: number) {
      if (failed) return Promise.resolve();
      sayDropped();
      // write('')'s callback runs once every earlier write is out ('drain' comes only after a refused write)
      return new Promise<void>((done) => {
        const timer = setTimeout(done, ms);
        stdout.write('', () => {
          clearTimeout(timer);
          done();
        });
      });
    },
  };

  function sayDropped(): void {
    if (dropped === 0) return;
    stdout.write(`${JSON.stringify({ level: 40, time: Date.now(), msg: `${dropped} log lines dropped: stdout was not being read` })}\n`);
    dropped = 0;
  }
}
