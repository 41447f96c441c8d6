import { InProcessTransport } from '../../src/adapters/in-process/transport';
import { PoisonRecordError, type IncomingRecord } from '../../src/ports/transport';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor(cond: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(5);
  }
}

let n = 0;
const names = () => {
  n += 1;
  return { topic: `test.in-process.${n}`, groupId: `group-${n}` };
};

describe('InProcessTransport', () => {
  let transport: InProcessTransport;
  beforeEach(() => {
    transport = new InProcessTransport({ retries: 3, retryDelayMs: 1 });
  });
  afterEach(() => transport.close());

  it('is the in-process kind and always pingable', async () => {
    expect(transport.kind).toBe('in-process');
    await expect(transport.ping()).resolves.toBeUndefined();
  });

  it('delivers records in order per key, and publish resolves only after the handler finished', async () => {
    const { topic, groupId } = names();
    const seen: Array<{ key: string | null; seq: number }> = [];
    let finished = 0;
    await transport.subscribe(
      topic,
      async (r) => {
        await sleep(Math.random() * 3);
        seen.push({ key: r.key, seq: (r.value as { seq: number }).seq });
        finished += 1;
      },
      { groupId },
    );
    // three keys published concurrently, each key's records in its own sequence of calls
    await Promise.all(
      ['a', 'b', 'c'].map(async (key) => {
        for (let seq = 0; seq < 20; seq += 2) {
          await transport.publish(topic, [
            { key, value: { seq } },
            { key, value: { seq: seq + 1 } },
          ]);
        }
      }),
    );
    expect(finished).toBe(60); // all handled by the time the publishes resolved
    for (const key of ['a', 'b', 'c']) {
      expect(seen.filter((s) => s.key === key).map((s) => s.seq)).toEqual([...Array(20).keys()]);
    }
  });

  it('never runs two records with the same key at the same time, even from concurrent publishes', async () => {
    const { topic, groupId } = names();
    const running = new Map<string, number>();
    let maxSameKey = 0;
    let maxOverall = 0;
    let overall = 0;
    await transport.subscribe(
      topic,
      async (r) => {
        const k = r.key!;
        running.set(k, (running.get(k) ?? 0) + 1);
        overall += 1;
        maxSameKey = Math.max(maxSameKey, running.get(k)!);
        maxOverall = Math.max(maxOverall, overall);
        await sleep(2);
        running.set(k, running.get(k)! - 1);
        overall -= 1;
      },
      { groupId },
    );
    await Promise.all(
      Array.from({ length: 40 }, (_, i) => transport.publish(topic, [{ key: `k${i % 4}`, value: i }])),
    );
    expect(maxSameKey).toBe(1);
    expect(maxOverall).toBeGreaterThan(1); // different keys do run concurrently
  });

  it('hands handlers a JSON copy of the value, with key and headers', async () => {
    const { topic, groupId } = names();
    const got: IncomingRecord[] = [];
    await transport.subscribe(topic, async (r) => void got.push(r), { groupId });
    const value = { at: new Date('2024-01-02T03:04:05.000Z'), gone: undefined, n: 1 };
    await transport.publish(topic, [{ key: 'k', value, headers: { 'x-a': '1' } }]);
    expect(got).toHaveLength(1);
    expect(got[0]).toMatchObject({ topic, key: 'k', value: { at: '2024-01-02T03:04:05.000Z', n: 1 }, headers: { 'x-a': '1' } });
    expect(got[0].value).not.toHaveProperty('gone');
    expect(typeof got[0].offset).toBe('string');
  });

  it('rejects a value that cannot be JSON-encoded before delivering anything', async () => {
    const { topic, groupId } = names();
    const handler = jest.fn(async () => {});
    await transport.subscribe(topic, handler, { groupId });
    await expect(
      transport.publish(topic, [
        { key: 'a', value: 1 },
        { key: 'b', value: { big: 1n } },
      ]),
    ).rejects.toThrow();
    expect(handler).not.toHaveBeenCalled();
  });

  it('retries a transient error and then succeeds, without dead-lettering', async () => {
    const { topic, groupId } = names();
    let attempts = 0;
    const handled: number[] = [];
    const onDeadLetter = jest.fn();
    await transport.subscribe(
      topic,
      async (r) => {
        const v = r.value as number;
        if (v === 1 && ++attempts < 3) throw new Error('database is busy');
        handled.push(v);
      },
      { groupId, onDeadLetter },
    );
    await transport.publish(topic, [0, 1, 2].map((v) => ({ key: 'k', value: v })));
    expect(attempts).toBe(3);
    expect(handled).toEqual([0, 1, 2]);
    expect(onDeadLetter).not.toHaveBeenCalled();
    expect(transport.deadLetters).toHaveLength(0);
  });

  it('rethrows a transient error after a few retries so the caller can answer 5xx', async () => {
    const { topic, groupId } = names();
    let attempts = 0;
    await transport.subscribe(
      topic,
      async () => {
        attempts += 1;
        throw new Error('still down');
      },
      { groupId },
    );
    await expect(transport.publish(topic, [{ key: 'k', value: 1 }])).rejects.toThrow('still down');
    expect(attempts).toBe(4); // first try + 3 retries
    expect(transport.deadLetters).toHaveLength(0);
  });

  it('dead-letters a poison record with its reason and goes on with the next records', async () => {
    const { topic, groupId } = names();
    const handled: number[] = [];
    const onDeadLetter = jest.fn();
    await transport.subscribe(
      topic,
      async (r) => {
        const v = r.value as number;
        if (v === 2) throw new PoisonRecordError('unknown provider message id');
        handled.push(v);
      },
      { groupId, onDeadLetter },
    );
    await transport.publish(topic, [0, 1, 2, 3, 4].map((v) => ({ key: 'k', value: v })));
    expect(handled).toEqual([0, 1, 3, 4]);
    expect(transport.deadLetters).toHaveLength(1);
    expect(transport.deadLetters[0]).toMatchObject({
      topic: `${topic}.dlq`,
      reason: 'unknown provider message id',
      record: { topic, key: 'k', value: 2 },
    });
    expect(onDeadLetter).toHaveBeenCalledTimes(1);
    expect(onDeadLetter.mock.calls[0][1]).toBe('unknown provider message id');
  });

  it('re-handles a record whose handler failed after recording its effect, and the effect stays single', async () => {
    // The in-process twin of "crashed between handling and commit": the effect is recorded, then the
    // handler fails; the record is delivered again and an idempotent store keeps one effect per record.
    const { topic, groupId } = names();
    const effects = new Map<string, number>();
    const deliveries = new Map<string, number>();
    await transport.subscribe(
      topic,
      async (r) => {
        const id = (r.value as { id: string }).id;
        deliveries.set(id, (deliveries.get(id) ?? 0) + 1);
        if (!effects.has(id)) effects.set(id, (effects.get(id) ?? 0) + 1); // idempotent apply
        if (id === 'r3' && deliveries.get(id) === 1) throw new Error('connection reset before commit');
      },
      { groupId },
    );
    await transport.publish(
      topic,
      ['r1', 'r2', 'r3', 'r4'].map((id) => ({ key: 'k', value: { id } })),
    );
    expect(deliveries.get('r3')).toBe(2);
    expect([...effects.entries()]).toEqual([
      ['r1', 1],
      ['r2', 1],
      ['r3', 1],
      ['r4', 1],
    ]);
  });

  it('queues records published before anyone subscribed and delivers them, in order, to the first subscriber', async () => {
    const { topic, groupId } = names();
    await transport.publish(topic, [1, 2, 3].map((v) => ({ key: 'k', value: v })));
    await transport.publish(topic, [{ key: null, value: 4 }]);
    const handled: number[] = [];
    let failOnce = true;
    await transport.subscribe(
      topic,
      async (r) => {
        if (r.value === 2 && failOnce) {
          failOnce = false;
          throw new Error('transient');
        }
        handled.push(r.value as number);
      },
      { groupId },
    );
    // published after subscribing: handled after the queued record with the same key
    await transport.publish(topic, [{ key: 'k', value: 5 }]);
    await waitFor(() => handled.length === 5);
    expect(handled.filter((v) => v !== 4)).toEqual([1, 2, 3, 5]);
    expect(handled).toContain(4);
  });

  it('gives every consumer group each record, and a shared group only once', async () => {
    const { topic } = names();
    const a: unknown[] = [];
    const b1: unknown[] = [];
    const b2: unknown[] = [];
    await transport.subscribe(topic, async (r) => void a.push(r.value), { groupId: 'a' });
    await transport.subscribe(topic, async (r) => void b1.push(r.value), { groupId: 'b' });
    await transport.subscribe(topic, async (r) => void b2.push(r.value), { groupId: 'b' });
    await transport.publish(topic, [1, 2].map((v) => ({ key: null, value: v })));
    expect(a).toEqual([1, 2]);
    expect(b1.length + b2.length).toBe(2);
  });

  it('stop() waits for the in-flight handler; later records wait for the next subscriber', async () => {
    const { topic, groupId } = names();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let finished = false;
    const sub = await transport.subscribe(
      topic,
      async () => {
        await gate;
        finished = true;
      },
      { groupId },
    );
    const publishing = transport.publish(topic, [{ key: 'k', value: 1 }]);
    await sleep(5);
    let stopped = false;
    const stopping = sub.stop().then(() => (stopped = true));
    await sleep(10);
    expect(stopped).toBe(false);
    release();
    await stopping;
    expect(finished).toBe(true);
    await publishing;

    await transport.publish(topic, [{ key: 'k', value: 2 }]); // queued: no subscriber now
    const later: unknown[] = [];
    await transport.subscribe(topic, async (r) => void later.push(r.value), { groupId });
    await waitFor(() => later.length === 1);
    expect(later).toEqual([2]);
  });

  it('lets a handler publish a record with its own key to its own topic without deadlocking', async () => {
    const { topic, groupId } = names();
    const handled: number[] = [];
    await transport.subscribe(
      topic,
      async (r) => {
        const v = r.value as number;
        handled.push(v);
        if (v === 1) await transport.publish(topic, [{ key: 'same', value: 2 }]);
      },
      { groupId },
    );
    await transport.publish(topic, [{ key: 'same', value: 1 }]);
    expect(handled).toEqual([1, 2]);
  });

  it('refuses to publish or subscribe once closed', async () => {
    const { topic, groupId } = names();
    await transport.close();
    await expect(transport.publish(topic, [{ key: null, value: 1 }])).rejects.toThrow('closed');
    await expect(transport.subscribe(topic, async () => {}, { groupId })).rejects.toThrow('closed');
  });
});
