import { BACKWARDS, END, FORWARDS, START as ESDB_START, type Position as EsdbPosition } from '@eventstore/db-client';
import { EsdbEventStore, type EsdbClient } from '../../src/adapters/event-store/esdb';
import { cmpEsdb, encodeEsdbPosition } from '../../src/adapters/event-store/esdb-read-all';
import { START } from '../../src/ports/event-store';
import { checkReached } from '../../src/cli/events';
import { CliUsageError } from '../../src/cli/failure';

// Regression review 20 of ae9456d: `events export --from` past the newest event of the log is refused (exit 1). On
// EventStoreDB the newest event (headPosition) is the newest of ours, but a read moves past the system events after
// it ($stats, $scavenges, a stream's $metadata) and the export prints that position as its 'resume with --from'. A
// nightly export that ended on system events was refused by the next run when nothing new had been appended. (No
// EventStoreDB server runs here: $all is an array read as EventStoreDB documents it, as in review16d-esdb.)

const at = (i: number): EsdbPosition => ({ commit: BigInt(4096 + 211 * i), prepare: BigInt(4096 + 211 * i) });

function esdbOver(kinds: Array<'app' | 'sys'>): EsdbEventStore {
  const log = kinds.map((k, i) => ({
    event: {
      id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
      streamId: k === 'app' ? `thing-${i}` : '$stats-127.0.0.1:2113',
      type: k === 'app' ? 'Thing' : '$statistics-collected',
      revision: 0n,
      isJson: true,
      data: { i },
      metadata: {},
      created: new Date(0),
      position: at(i),
    },
  }));
  const readAll = ({ fromPosition, direction, maxCount }: { fromPosition: unknown; direction: unknown; maxCount: number }) => {
    let items: typeof log;
    if (direction === FORWARDS) {
      items = fromPosition === ESDB_START ? log : log.filter((x) => cmpEsdb(x.event.position, fromPosition as EsdbPosition) >= 0);
    } else {
      expect(direction).toBe(BACKWARDS);
      items = (fromPosition === END ? log : log.filter((x) => cmpEsdb(x.event.position, fromPosition as EsdbPosition) <= 0)).slice().reverse();
    }
    const page = items.slice(0, maxCount);
    return (async function* () {
      yield* page;
    })();
  };
  return new EsdbEventStore({ client: { readAll } as unknown as EsdbClient, watchOthers: false });
}

describe('regression review 20: an export resumed from the position it printed (EventStoreDB)', () => {
  it('takes the printed position of a run that ended on system events, and still refuses one past the end of $all', async () => {
    const store = esdbOver(['app', 'app', 'sys', 'sys']);
    // what the export does: read to the end, print the batch's nextPosition
    const read = await store.readAll(START, 10);
    expect(read.events.map((e) => e.streamId)).toEqual(['thing-0', 'thing-1']);
    const printed = read.nextPosition;
    expect(printed).toBe(encodeEsdbPosition(at(3)));
    expect(await store.headPosition()).toBe(encodeEsdbPosition(at(1)));

    // the next run, nothing appended since: an empty read, then the check (it used to throw here)
    expect((await store.readAll(printed, 1)).events).toEqual([]);
    await expect(checkReached(store, printed)).resolves.toBeUndefined();
    await expect(checkReached(store, encodeEsdbPosition(at(2)))).resolves.toBeUndefined();

    // a position of another log (past the end of $all, system events included) is still refused, naming the head
    const foreign = encodeEsdbPosition(at(40));
    const err = await checkReached(store, foreign).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CliUsageError);
    expect((err as Error).message).toBe(
      `--from "${foreign}" is after the newest event of this log ("${encodeEsdbPosition(at(1))}"): it is no position of this log; give the "position" of a line exported from it`,
    );
  });
});
