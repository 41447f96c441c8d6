import { InProcessTransport } from '../../src/adapters/in-process/transport';
import type { IncomingRecord, RecordOutcome } from '../../src/ports/transport';

// The in-process adapter with a batch handler: every record is a batch of one, with the per-record semantics.

let n = 0;
const names = () => {
  n += 1;
  return { topic: `test.in-process-batch.${n}`, groupId: `group-${n}` };
};
const perRecord = async () => {
  throw new Error('the per-record handler must not be called when a batch handler is given');
};

describe('InProcessTransport with a batch handler', () => {
  let transport: InProcessTransport;
  beforeEach(() => {
    transport = new InProcessTransport({ retries: 2, retryDelayMs: 1 });
  });
  afterEach(() => transport.close());

  it('hands each record alone, in order per key; publish resolves once they are handled', async () => {
    const { topic, groupId } = names();
    const calls: IncomingRecord[][] = [];
    await transport.subscribe(topic, perRecord, {
      groupId,
      batchHandler: async (records) => {
        calls.push(records);
        return records.map((): RecordOutcome => ({ kind: 'ok' }));
      },
    });
    await transport.publish(topic, [0, 1, 2].map((seq) => ({ key: 'k', value: { seq, at: new Date(0) } })));
    expect(calls.map((c) => c.map((r) => [r.key, r.value]))).toEqual([
      [['k', { seq: 0, at: '1970-01-01T00:00:00.000Z' }]],
      [['k', { seq: 1, at: '1970-01-01T00:00:00.000Z' }]],
      [['k', { seq: 2, at: '1970-01-01T00:00:00.000Z' }]],
    ]);
  });

  it('poison → dead letter with the reason; retry → retried, then publish rejects with its error', async () => {
    const { topic, groupId } = names();
    const deadLettered: string[] = [];
    let attempts = 0;
    await transport.subscribe(topic, perRecord, {
      groupId,
      onDeadLetter: (_record, reason) => void deadLettered.push(reason),
      batchHandler: async (records) =>
        records.map((r): RecordOutcome => {
          const { what } = r.value as { what: string };
          if (what === 'poison') return { kind: 'poison', reason: 'never applicable' };
          if (what === 'retry') {
            attempts++;
            return { kind: 'retry', error: new Error('store unavailable') };
          }
          return { kind: 'ok' };
        }),
    });
    await transport.publish(topic, [{ key: 'a', value: { what: 'poison' } }]);
    expect(deadLettered).toEqual(['never applicable']);
    expect(transport.deadLetters.map((d) => [d.topic, d.reason, d.record.value])).toEqual([[`${topic}.dlq`, 'never applicable', { what: 'poison' }]]);
    await expect(transport.publish(topic, [{ key: 'b', value: { what: 'retry' } }])).rejects.toThrow('store unavailable');
    expect(attempts).toBe(3); // the first try and 2 retries
  });

  it('a retry that clears is handled once and publish resolves', async () => {
    const { topic, groupId } = names();
    let calls = 0;
    await transport.subscribe(topic, perRecord, {
      groupId,
      batchHandler: async (records) => records.map((): RecordOutcome => (++calls === 1 ? { kind: 'retry', error: new Error('busy') } : { kind: 'ok' })),
    });
    await transport.publish(topic, [{ key: 'a', value: {} }]);
    expect(calls).toBe(2);
    expect(transport.deadLetters).toEqual([]);
  });
});
