import { once } from 'node:events';
import { type Command, InvalidArgumentError } from 'commander';
import { InvalidPositionError, type Position, type ReadAllBatch, type RecordedEvent, START } from '../ports/event-store';
import { createEventRegistry } from '../events/catalogue';
import { type LogReader, UnreadableEventError, upToUnreadable } from '../projections/projection';
import { positiveInt } from './args';
import { CliUsageError } from './failure';
import { progress, progressDone, withCliRuntime } from './runtime';
import { eventSizeEstimate, nextReadSize } from '../projections/read-sizes';

/** `--company 7` or `--company 7,9`: the company ids, each a positive integer (commander reports anything else). */
const companyIds = (v: string): Set<number> => {
  const parts = v.split(',').map((p) => p.trim());
  if (parts.some((p) => !/^[1-9]\d*$/.test(p))) {
    throw new InvalidArgumentError('A positive integer or a comma-separated list of positive integers is expected.');
  }
  return new Set(parts.map(Number));
};

/** The most events one read of the log asks for. */
const BATCH = 2000;

/** `--type A,B`: each must be an event type of the catalogue (a misspelt one would export nothing, silently). */
function eventTypes(option: string | undefined): Set<string> | undefined {
  if (option === undefined) return undefined;
  const types = new Set(option.split(',').map((t) => t.trim()));
  // `--type "$TYPES"` with an empty variable would otherwise export every type
  if (types.has('')) throw new CliUsageError(`--type ${JSON.stringify(option)}: an empty event type; give comma-separated event types (\`switchboard events schemas\` lists them)`);
  const registry = createEventRegistry();
  const unknown = [...types].filter((t) => !registry.has(t));
  if (unknown.length) throw new CliUsageError(`--type: unknown event type ${unknown.join(', ')} (\`switchboard events schemas\` lists them)`);
  return types;
}

/**
 * Watches stdout for a write error: a reader that went away (`| head`: EPIPE) ends the export quietly, as a
 * pipeline expects; another (a full disk: ENOSPC) ends it with one line. Without a listener Node throws either.
 */
function watchOutput(): { failed: () => NodeJS.ErrnoException | undefined; drained: () => Promise<void>; flushed: () => Promise<void> } {
  let failure: NodeJS.ErrnoException | undefined;
  process.stdout.on('error', (err: NodeJS.ErrnoException) => (failure ??= err));
  return {
    failed: () => failure,
    // `once` also settles (rejects) on 'error'
    drained: () => once(process.stdout, 'drain').then(() => undefined, () => undefined),
    // the callback runs once what was written before is written, or with the write's error
    flushed: () => new Promise<void>((ok) => process.stdout.write('', () => ok())),
  };
}

function outputFailure(err: NodeJS.ErrnoException): CliUsageError {
  return new CliUsageError(
    `cannot write the export (${err.code ?? err.message}); the output may end with a partial line: resume with --from the position of its last complete line`,
  );
}

/**
 * The next batch of the log. The store parses the position before it reads anything: only `--from` can be text
 * that is not one of its positions (every later one comes from the store), so its refusal names `--from`.
 */
async function readBatch(reader: LogReader, kind: string, after: Position, size: number): Promise<ReadAllBatch> {
  try {
    return await reader.readAll(after, size);
  } catch (err) {
    if (!(err instanceof InvalidPositionError)) throw err;
    throw new CliUsageError(
      `--from ${JSON.stringify(err.position)} is not a position of the ${kind} event store: expected ${err.expected} (the "position" of an exported line)`,
    );
  }
}

/**
 * `--from` past the newest event of the log is no checkpoint of this log (another installation's, a digit changed
 * by hand): every position an export writes or prints is an event's (on EventStoreDB, possibly a system event's
 * after the newest of ours), or START. Not checked on an empty log.
 * Without this check such an export wrote nothing and printed the same position back, status 0, run after run
 * (review 19).
 */
export async function checkReached(reader: LogReader, from: Position): Promise<void> {
  const head = await reader.headPosition();
  // an empty log takes any position (test/e2e/event-store-errors.test.ts pins `--from 1:1` there as taken)
  if (head === START || reader.comparePositions(from, head) <= 0) return;
  // On EventStoreDB the head is the newest event of ours, but a read moves past the system events after it, and the
  // export prints that position ('resume with --from'): the end of the log is where a read from the head stops
  // (regression review 20: the printed position of a run that ended on system events was refused by the next run)
  const past = await reader.readAll(head, 1).catch(() => undefined);
  if (!past || past.events.length > 0 || reader.comparePositions(from, past.nextPosition) <= 0) return;
  throw new CliUsageError(
    `--from ${JSON.stringify(from)} is after the newest event of this log (${JSON.stringify(head)}): `
      + 'it is no position of this log; give the "position" of a line exported from it',
  );
}

function unreadable(after: Position, e: UnreadableEventError): CliUsageError {
  const from = JSON.stringify(after);
  return new CliUsageError(
    `the event after position ${from} cannot be exported: ${e.refusal.message}; the lines before it are complete `
      + `(it needs an upcaster or a fix of the stored event; then resume with --from ${from})`,
  );
}

/** Whether the export writes `e`: its type among `--type`, its company among `--company` (none: every one). */
const exportFilter = (types: Set<string> | undefined, companies: Set<number> | undefined) => (e: RecordedEvent): boolean => {
  if (types && !types.has(e.type)) return false;
  if (!companies) return true;
  const company: unknown = e.metadata.companyId;
  return typeof company === 'number' && companies.has(company);
};

/**
 * Whether an unreadable event may be one the export writes (it stops just before it): an unreadable event's metadata
 * is as stored, and a company id that is not a number may be any company's. Only for that decision: a readable
 * event whose company is not a number is written by no `--company` export (regression review 14: the export wrote
 * it under every `--company`, another company's event among them).
 */
const mayBeExported = (types: Set<string> | undefined, companies: Set<number> | undefined) => (e: RecordedEvent): boolean => {
  if (types && !types.has(e.type)) return false;
  if (!companies) return true;
  const company: unknown = e.metadata.companyId;
  return company !== null && (typeof company !== 'number' || companies.has(company));
};

export function registerEventCommands(program: Command): void {
  const events = program.command('events').description('the event log, for analytics replay');

  events
    .command('export')
    .description('stream the log as NDJSON (one event with metadata per line), resumable from a position')
    .option('--from <position>', 'start strictly after this position (the `position` of the last line you have)')
    .option('--type <types>', 'comma-separated event types to include')
    .option('--company <ids>', 'comma-separated company ids to include', companyIds)
    .option('--limit <n>', 'stop after this many lines', positiveInt)
    .action((opts: { from?: string; type?: string; company?: Set<number>; limit?: number }) => {
      const types = eventTypes(opts.type);
      return withCliRuntime(async (s) => {
        const output = watchOutput();
        const companies = opts.company;
        const limit = opts.limit ?? Infinity;
        let position = (opts.from ?? START) as Position;
        let written = 0;
        let scanned = 0;
        let resumeFrom = position;
        let size = 1;
        const exported = exportFilter(types, companies);
        const stopsAt = mayBeExported(types, companies);
        while (written < limit && !output.failed()) {
          // each event is upcast on its own: one its schema refuses stops the export just before it only when the
          // export would write it (the log's reader used to fail the whole read, whatever the filters)
          let batch: ReadAllBatch;
          try {
            batch = upToUnreadable(await readBatch(s.runner.reader, s.store.kind, position, size), stopsAt);
          } catch (err) {
            if (err instanceof UnreadableEventError) throw unreadable(position, err);
            throw err;
          }
          if (batch.events.length === 0) {
            // nothing after --from: is it a position this log has reached? (the read has checked its form)
            if (scanned === 0 && opts.from !== undefined) await checkReached(s.runner.reader, position);
            break;
          }
          // the largest event of the batch: a written one by its line (exact, made anyway), one passed over by its
          // estimate (regression review 22: the estimate alone, which measures an array of more than 3 items by 3 of
          // them, took a chunk of 2 MB for a few hundred bytes, and a read of 64 of them ran a 192 MB heap out)
          let largest = 0;
          for (const e of batch.events) {
            scanned++;
            resumeFrom = e.position;
            if (!exported(e)) {
              largest = Math.max(largest, eventSizeEstimate(e));
              continue;
            }
            const line = JSON.stringify({ position: e.position, stream: e.streamId, revision: e.revision.toString(), type: e.type, data: e.data, metadata: e.metadata });
            largest = Math.max(largest, line.length);
            if (!process.stdout.write(`${line}\n`)) await output.drained();
            if (output.failed()) break;
            if (++written >= limit) break;
          }
          if (written < limit) resumeFrom = batch.nextPosition;
          position = batch.nextPosition;
          // READ_BYTES a read, as the other readers of the log (review 19: 2,000 whatever their size ran a heap out)
          size = nextReadSize(size, largest, BATCH);
          progress(`exported ${written} of ${scanned} events`);
        }
        progressDone();
        const failure = output.failed();
        if (failure?.code === 'EPIPE') return;
        if (failure) throw outputFailure(failure);
        process.stderr.write(`exported ${written} events (scanned ${scanned}); resume with --from '${resumeFrom}'\n`);
      }, 'the output may end with a partial line: resume with --from the position of its last complete line');
    });

  events
    .command('schemas')
    .description('print the JSON Schema of every event type (one JSON object per line)')
    .action(async () => {
      const output = watchOutput();
      for (const s of createEventRegistry().schemas()) process.stdout.write(`${JSON.stringify(s)}\n`);
      await output.flushed();
      const failure = output.failed();
      if (failure && failure.code !== 'EPIPE') throw new CliUsageError(`cannot write the schemas (${failure.code ?? failure.message})`);
    });
}
