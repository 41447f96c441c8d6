import { CreationGroupCommit } from '../../src/adapters/event-store/creation-group-commit';
import { type AppendResult, type StreamAppend, WrongExpectedRevisionError } from '../../src/ports/event-store';

// The batching rules of the Postgres store's group commit, against an in-memory recorder of the calls it makes
// (the store's own behaviour under it is tested on a real Postgres in test/integration/event-store-postgres.test.ts).
const creation = (streamId: string): StreamAppend => ({
  streamId,
  events: [{ type: 'Created', data: {}, metadata: { eventId: streamId, correlationId: 'c', causationId: null, companyId: 1, actor: 't', at: '' } }],
  expected: 'no_stream',
});
const resultOf = (a: StreamAppend): AppendResult => ({ nextRevision: 0n, position: `1:${a.streamId}` as never, alreadyAppended: false });

function recorder(fail?: { many?: unknown; one?: (a: StreamAppend) => unknown }) {
  const calls: string[][] = [];
  const gate: Array<() => void> = [];
  const group = new CreationGroupCommit({
    appendOne: async (a) => {
      calls.push([a.streamId]);
      await new Promise<void>((r) => gate.push(r));
      const err = fail?.one?.(a);
      if (err) throw err;
      return resultOf(a);
    },
    appendMany: async (appends) => {
      calls.push(appends.map((a) => a.streamId));
      await new Promise<void>((r) => gate.push(r));
      if (fail?.many) throw fail.many;
      return appends.map(resultOf);
    },
    maxBatch: 3,
  });
  const release = async () => {
    while (gate.length > 0) gate.shift()!();
    await new Promise((r) => setImmediate(r));
  };
  return { group, calls, release };
}

describe('creation group commit', () => {
  it('sends the first creation alone at once, then what arrived meanwhile together, sorted, at most maxBatch, one stream once', async () => {
    const { group, calls, release } = recorder();
    const all = ['d', 'c', 'b', 'c', 'a', 'e'].map((s) => group.append(creation(s)));
    expect(calls).toEqual([['d']]);
    await release();
    expect(calls).toEqual([['d'], ['a', 'b', 'c']]); // 'c' twice: the second waits for the next batch
    await release();
    expect(calls).toEqual([['d'], ['a', 'b', 'c'], ['c', 'e']]);
    await release();
    await expect(Promise.all(all)).resolves.toEqual(['d', 'c', 'b', 'c', 'a', 'e'].map((s) => resultOf(creation(s))));
    expect(group.stats).toEqual({ batches: 3, creations: 6 });
  });

  it('keeps two creations with an event id in common (in two streams) out of one batch', async () => {
    const { group, calls, release } = recorder();
    const shared = (streamId: string): StreamAppend => ({ ...creation(streamId), events: [{ ...creation('same-id').events[0] }] });
    const all = Promise.all([group.append(creation('x')), group.append(shared('a')), group.append(creation('b')), group.append(shared('c'))]);
    await release();
    expect(calls).toEqual([['x'], ['a', 'b']]);
    await release();
    expect(calls).toEqual([['x'], ['a', 'b'], ['c']]);
    await release();
    await all;
  });

  it('when one entry fails the batch, appends each on its own: only that one fails', async () => {
    const refused = new WrongExpectedRevisionError('b', 'no_stream', 0n);
    const { group, calls, release } = recorder({ many: refused, one: (a) => (a.streamId === 'b' ? refused : undefined) });
    const first = group.append(creation('x'));
    const batch = Promise.allSettled(['a', 'b', 'c'].map((s) => group.append(creation(s))));
    await release();
    await release();
    await release();
    expect(calls).toEqual([['x'], ['a', 'b', 'c'], ['a'], ['b'], ['c']]);
    await expect(first).resolves.toEqual(resultOf(creation('x')));
    const settled = await batch;
    expect(settled.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((settled[1] as PromiseRejectedResult).reason).toBe(refused);
  });

  it('any other failure of the batch (the database gone) fails every entry with it, without appending them again', async () => {
    const down = Object.assign(new Error('connection terminated'), { code: '57P01' });
    const { group, calls, release } = recorder({ many: down });
    void group.append(creation('x'));
    const batch = Promise.allSettled(['a', 'b'].map((s) => group.append(creation(s))));
    await release();
    await release();
    const settled = await batch;
    expect(settled.map((r) => r.status === 'rejected' && r.reason)).toEqual([down, down]);
    expect(calls).toEqual([['x'], ['a', 'b']]);
  });
});
