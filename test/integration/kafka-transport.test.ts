// KafkaTransport against a real Kafka broker (test/support/kafka.mjs starts Apache Kafka from its Maven
// jars, or uses KAFKA_BROKERS). Skipped, with the reason, when no broker could be had.
import { spawn } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { KafkaTransport, type TransportLogger } from '../../src/adapters/kafka/transport';
import { PoisonRecordError, type IncomingRecord, type RecordOutcome, type Subscription } from '../../src/ports/transport';
import { uniqueTopicAndGroup, waitFor } from '../support/kafka-names';

const BROKERS = process.env.TEST_KAFKA_BROKERS;
const d = BROKERS ? describe : describe.skip;
if (!BROKERS) {
  console.warn(`Kafka transport tests skipped: ${process.env.TEST_KAFKA_SKIP_REASON ?? 'TEST_KAFKA_BROKERS is unset'}`);
}

const ROOT = resolve(__dirname, '..', '..');
const brokers = () => BROKERS!.split(',');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const unique = uniqueTopicAndGroup;

/** Collects the adapter's (and kafkajs's) log instead of printing it. */
function quietLogger(): TransportLogger & { lines: Array<{ level: string; msg?: string; obj: object }> } {
  const lines: Array<{ level: string; msg?: string; obj: object }> = [];
  const at = (level: string) => (obj: object, msg?: string) => void lines.push({ level, obj, msg });
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

d('KafkaTransport (real broker)', () => {
  const transports: KafkaTransport[] = [];
  const newTransport = (extra: Partial<ConstructorParameters<typeof KafkaTransport>[0]> = {}) => {
    const t = new KafkaTransport({ brokers: brokers(), clientId: 'switchboard-test', logger: quietLogger(), ...extra });
    transports.push(t);
    return t;
  };
  const kafka = () => new Kafka({ clientId: 'switchboard-test-inspector', brokers: brokers(), logLevel: logLevel.NOTHING });
  /** The first `count` records of `<topic>.dlq`, as they landed there (key, value, headers). */
  const readDeadLetters = async (topic: string, groupId: string, count: number) => {
    const dlq: Array<{ key: string | null; value: string | null; headers: Record<string, string> }> = [];
    const reader = kafka().consumer({ groupId: `${groupId}-dlq-reader`, maxWaitTimeInMs: 200 });
    await reader.connect();
    try {
      await reader.subscribe({ topic: `${topic}.dlq`, fromBeginning: true });
      await reader.run({
        eachMessage: async ({ message }) => {
          const headers: Record<string, string> = {};
          for (const [k, v] of Object.entries(message.headers ?? {})) headers[k] = String(v);
          dlq.push({ key: message.key?.toString() ?? null, value: message.value?.toString() ?? null, headers });
        },
      });
      await waitFor('the DLQ records', () => dlq.length === count);
    } finally {
      await reader.disconnect();
    }
    return dlq;
  };
  /** A value that is not JSON at all, written by some other producer. */
  const publishNotJson = async (topic: string) => {
    const raw = kafka().producer();
    await raw.connect();
    await raw.send({ topic, messages: [{ key: 'same', value: 'not json {' }] });
    await raw.disconnect();
  };

  /** high watermark summed over the topic's partitions (= records written, for a fresh topic) */
  async function recordsIn(topic: string): Promise<number> {
    const admin = kafka().admin();
    await admin.connect();
    try {
      const offsets = await admin.fetchTopicOffsets(topic);
      return offsets.reduce((sum, p) => sum + Number(p.high), 0);
    } finally {
      await admin.disconnect();
    }
  }

  afterEach(async () => {
    await Promise.allSettled(transports.splice(0).map((t) => t.close()));
  });

  it('pings the cluster and reports its kind', async () => {
    const t = newTransport();
    expect(t.kind).toBe('kafka');
    await expect(t.ping()).resolves.toBeUndefined();
  });

  it('(a) publishes with acks and consumes in order per key', async () => {
    const { topic, groupId } = unique('order');
    const producerSide = newTransport();
    const consumerSide = newTransport();
    const keys = ['k1', 'k2', 'k3', 'k4', 'k5', 'k6'];
    const perKey = 40;

    // publishes of different keys run concurrently; each key's records go out in sequence
    await Promise.all(
      keys.map(async (key) => {
        for (let seq = 0; seq < perKey; seq += 4) {
          await producerSide.publish(
            topic,
            [0, 1, 2, 3].map((i) => ({ key, value: { key, seq: seq + i }, headers: { 'x-seq': String(seq + i) } })),
          );
        }
      }),
    );
    // publish resolved => acknowledged: every record is in the log before anyone consumes
    expect(await recordsIn(topic)).toBe(keys.length * perKey);

    const seen: IncomingRecord[] = [];
    await consumerSide.subscribe(topic, async (r) => void seen.push(r), { groupId });
    await waitFor('all records', () => seen.length === keys.length * perKey);

    for (const key of keys) {
      const mine = seen.filter((r) => r.key === key);
      expect(mine.map((r) => (r.value as { seq: number }).seq)).toEqual([...Array(perKey).keys()]);
      expect(new Set(mine.map((r) => r.partition)).size).toBe(1); // a key lives on one partition
      expect(mine.every((r, i) => r.headers?.['x-seq'] === String(i))).toBe(true);
    }
    expect(seen.every((r) => r.topic === topic && typeof r.offset === 'string')).toBe(true);
    // more than one partition was in use
    expect(new Set(seen.map((r) => r.partition)).size).toBeGreaterThan(1);
  });

  it('(b) re-handles a record after the consumer stopped between handling and commit; the effect stays single', async () => {
    const { topic, groupId } = unique('redeliver');
    const effects = new Map<string, number>(); // idempotent store: record id -> times the effect was applied
    const deliveries = new Map<string, number>();
    const apply = (id: string) => {
      deliveries.set(id, (deliveries.get(id) ?? 0) + 1);
      if (!effects.has(id)) effects.set(id, 1); // keyed by record id: a re-delivery is a no-op
    };
    const ids = Array.from({ length: 10 }, (_, i) => `rec-${i}`);
    const publisher = newTransport();
    await publisher.publish(topic, ids.map((id) => ({ key: 'one-key', value: { id } })));

    // first consumer: applies rec-0..rec-5, then "crashes" while handling rec-5 (effect recorded, the
    // handler fails, the consumer goes away): rec-5's offset is never committed
    const first = newTransport({ sessionTimeoutMs: 6_000 });
    let sub1!: Subscription;
    let crashed = false;
    sub1 = await first.subscribe(
      topic,
      async (r) => {
        const { id } = r.value as { id: string };
        if (crashed) throw new Error('consumer is gone');
        apply(id);
        if (id === 'rec-5') {
          crashed = true;
          void sub1.stop();
          throw new Error('connection lost before commit');
        }
      },
      { groupId },
    );
    await waitFor('the crash', () => crashed);
    await sub1.stop();
    expect(ids.slice(0, 6).every((id) => deliveries.get(id) === 1)).toBe(true);
    expect(deliveries.has('rec-6')).toBe(false);

    // a second consumer in the same group takes over from the last committed offset
    const second = newTransport({ sessionTimeoutMs: 6_000 });
    await second.subscribe(topic, async (r) => apply((r.value as { id: string }).id), { groupId });
    await waitFor('every record applied', () => ids.every((id) => effects.has(id)));
    await sleep(300);

    expect(deliveries.get('rec-5')).toBe(2); // re-delivered
    expect(ids.slice(0, 5).every((id) => deliveries.get(id) === 1)).toBe(true); // committed before the crash
    expect(ids.every((id) => effects.get(id) === 1)).toBe(true); // exactly one effect per record
  });

  it('(b) a consumer process killed with SIGKILL right after applying a record: redelivered, effect single', async () => {
    const { topic, groupId } = unique('sigkill');
    const work = mkdtempSync(join(tmpdir(), 'switchboard-kafka-crash-'));
    try {
      const effectsFile = join(work, 'effects.log'); // the idempotent store, shared by both consumers
      const deliveriesFile = join(work, 'deliveries.log');
      writeFileSync(effectsFile, '');
      writeFileSync(deliveriesFile, '');
      const ids = Array.from({ length: 20 }, (_, i) => `rec-${String(i).padStart(2, '0')}`);
      await newTransport().publish(topic, ids.map((id) => ({ key: 'one-key', value: { id } })));

      // The child runs the real adapter (compiled with swc) and kills itself with SIGKILL inside the
      // handler of rec-09, after recording its effect and before returning (so before any commit).
      const childJs = compileAdapterFor(work);
      const child = spawn(process.execPath, [childJs, BROKERS!, topic, groupId, effectsFile, deliveriesFile, 'rec-09'], {
        env: { ...process.env, NODE_PATH: join(ROOT, 'node_modules') },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let childErr = '';
      child.stderr.on('data', (b) => (childErr += b));
      const exit = await new Promise<{ code: number | null; signal: string | null }>((r) =>
        child.on('exit', (code, signal) => r({ code, signal })),
      );
      expect({ exit, childErr }).toEqual({ exit: { code: null, signal: 'SIGKILL' }, childErr: '' });

      const lines = (f: string) => readFileSync(f, 'utf8').split('\n').filter(Boolean);
      expect(lines(effectsFile)).toEqual(ids.slice(0, 10)); // the child applied rec-00..rec-09

      // the survivor, same group, same idempotent store
      const applied = new Set(lines(effectsFile));
      const redelivered: string[] = [];
      const survivor = newTransport({ sessionTimeoutMs: 6_000 });
      await survivor.subscribe(
        topic,
        async (r) => {
          const { id } = r.value as { id: string };
          appendFileSync(deliveriesFile, `${id}\n`);
          if (applied.has(id)) redelivered.push(id);
          else {
            applied.add(id);
            appendFileSync(effectsFile, `${id}\n`);
          }
        },
        { groupId },
      );
      await waitFor('every record applied', () => ids.every((id) => applied.has(id)), 45_000);
      await sleep(300);

      expect(redelivered).toContain('rec-09'); // the record being handled at the crash came again
      const effects = lines(effectsFile);
      expect(effects.slice().sort()).toEqual(ids); // exactly one effect per record
      const deliveries = lines(deliveriesFile);
      expect(deliveries.filter((id) => id === 'rec-09').length).toBeGreaterThanOrEqual(2);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }, 90_000);

  it('(c) sends a poison record to <topic>.dlq with the reason and keeps handling the partition', async () => {
    const { topic, groupId } = unique('poison');
    const t = newTransport();
    await t.publish(topic, [0, 1, 2].map((n) => ({ key: 'same', value: { n }, headers: { 'x-trace': `t${n}` } })));
    await publishNotJson(topic);
    await t.publish(topic, [3, 4, 5].map((n) => ({ key: 'same', value: { n } })));

    const handled: number[] = [];
    let poisonOffset: string | undefined;
    const deadLettered: Array<{ record: IncomingRecord; reason: string }> = [];
    await t.subscribe(
      topic,
      async (r) => {
        const { n } = r.value as { n: number };
        if (n === 1) {
          poisonOffset = r.offset;
          throw new PoisonRecordError('unknown provider message id wamid.X');
        }
        handled.push(n);
      },
      { groupId, onDeadLetter: (record, reason) => void deadLettered.push({ record, reason }) },
    );
    await waitFor('the records after the poison ones', () => handled.includes(5));
    expect(handled).toEqual([0, 2, 3, 4, 5]);
    expect(deadLettered.map((x) => x.reason)).toEqual([
      'unknown provider message id wamid.X',
      expect.stringMatching(/^value is not JSON/),
    ]);

    // what landed in the dead-letter topic: the original records, byte for byte, with the reason
    const dlq = await readDeadLetters(topic, groupId, 2);
    expect(dlq[0]).toEqual({
      key: 'same',
      value: JSON.stringify({ n: 1 }),
      headers: {
        'x-trace': 't1',
        'x-dlq-reason': 'unknown provider message id wamid.X',
        'x-original-topic': topic,
        'x-original-partition': String(deadLettered[0].record.partition),
        'x-original-offset': poisonOffset,
      },
    });
    expect(dlq[1]).toMatchObject({
      key: 'same',
      value: 'not json {',
      headers: { 'x-dlq-reason': expect.stringMatching(/^value is not JSON/), 'x-original-topic': topic },
    });
    expect(await recordsIn(`${topic}.dlq`)).toBe(2);
  });

  it('(d) retries a transient error until it succeeds, in order, without dead-lettering', async () => {
    const { topic, groupId } = unique('transient');
    const t = newTransport({ retryInitialMs: 50 });
    await t.publish(topic, [0, 1, 2, 3].map((n) => ({ key: 'same', value: { n } })));
    let attempts = 0;
    const handled: number[] = [];
    const onDeadLetter = jest.fn();
    await t.subscribe(
      topic,
      async (r) => {
        const { n } = r.value as { n: number };
        if (n === 1 && ++attempts <= 3) throw new Error('event store unavailable');
        handled.push(n);
      },
      { groupId, onDeadLetter },
    );
    await waitFor('all records', () => handled.length === 4);
    expect(attempts).toBe(4);
    expect(handled).toEqual([0, 1, 2, 3]);
    expect(onDeadLetter).not.toHaveBeenCalled();
    expect(await recordsIn(`${topic}.dlq`)).toBe(0);
  });

  it('(d) a long backoff pauses only the failing partition; the others go on meanwhile', async () => {
    const { topic, groupId } = unique('backoff');
    const t = newTransport({ retryInitialMs: 400 }); // 400 ms, 800 ms in place, then 1.6 s paused
    // find two keys on different partitions: publish one record per key and look where they land
    const keys = Array.from({ length: 12 }, (_, i) => `key-${i}`);
    await t.publish(topic, keys.map((key) => ({ key, value: { key, phase: 'probe' } })));
    const partitionOf = new Map<string, number>();
    const log: Array<{ key: string; phase: string; at: number }> = [];
    let firstFailureAt = 0;
    let failures = 0;
    let failingKey = '';
    await t.subscribe(
      topic,
      async (r) => {
        const { key, phase } = r.value as { key: string; phase: string };
        partitionOf.set(key, r.partition!);
        if (phase === 'fail' && ++failures <= 3) {
          if (failures === 1) firstFailureAt = Date.now();
          throw new Error('downstream busy');
        }
        log.push({ key, phase, at: Date.now() });
      },
      { groupId },
    );
    await waitFor('the probes', () => partitionOf.size === keys.length);
    failingKey = keys[0];
    const otherKey = keys.find((k) => partitionOf.get(k) !== partitionOf.get(failingKey))!;
    expect(otherKey).toBeDefined();

    await t.publish(topic, [
      { key: failingKey, value: { key: failingKey, phase: 'fail' } },
      { key: failingKey, value: { key: failingKey, phase: 'after-fail' } },
    ]);
    await waitFor('the first failure', () => failures >= 1);
    await sleep(1_300); // now in the paused (1.6 s) backoff
    await t.publish(topic, [{ key: otherKey, value: { key: otherKey, phase: 'meanwhile' } }]);
    await waitFor('the failing record', () => log.some((e) => e.phase === 'after-fail'), 20_000);

    const pos = (phase: string) => log.findIndex((e) => e.phase === phase);
    expect(failures).toBe(4);
    expect(pos('meanwhile')).toBeGreaterThanOrEqual(0);
    expect(pos('meanwhile')).toBeLessThan(pos('fail')); // the other partition did not wait
    expect(pos('fail')).toBeLessThan(pos('after-fail')); // the failing partition kept its order
    expect(log[pos('fail')].at - firstFailureAt).toBeGreaterThanOrEqual(2_500); // 400 + 800 + 1600 ms of backoff
  });

  it('stop() lets the in-flight handler finish and commits it: a new consumer starts after it', async () => {
    const { topic, groupId } = unique('stop');
    const t = newTransport();
    await t.publish(topic, [0, 1, 2, 3, 4].map((n) => ({ key: 'same', value: { n } })));
    const handled: number[] = [];
    let sub!: Subscription;
    let stopping: Promise<void> | undefined;
    sub = await t.subscribe(
      topic,
      async (r) => {
        const { n } = r.value as { n: number };
        if (n === 2) {
          stopping = sub.stop(); // asked to stop while handling n=2
          await sleep(300);
        }
        handled.push(n);
      },
      { groupId },
    );
    await waitFor('stop requested', () => stopping !== undefined);
    await stopping;
    expect(handled).toEqual([0, 1, 2]);

    const again: number[] = [];
    await newTransport().subscribe(topic, async (r) => void again.push((r.value as { n: number }).n), { groupId });
    await waitFor('the rest', () => again.length === 2);
    await sleep(300);
    expect(again).toEqual([3, 4]);
  });

  it('keyed concurrency: handles different keys at once, keeps each key in order, retries in place, commits once', async () => {
    const { topic, groupId } = unique('keyed');
    const t = newTransport();
    const keys = Array.from({ length: 10 }, (_, i) => `key-${i}`);
    const perKey = 30;
    for (let seq = 0; seq < perKey; seq++) await t.publish(topic, keys.map((key) => ({ key, value: { key, seq } })));
    const seen = new Map<string, number[]>();
    let inFlight = 0;
    let maxInFlight = 0;
    let failedOnce = false;
    await t.subscribe(
      topic,
      async (r) => {
        const { key, seq } = r.value as { key: string; seq: number };
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        try {
          await sleep(1 + (seq % 3));
          if (key === 'key-3' && seq === 7 && !failedOnce) {
            failedOnce = true;
            throw new Error('transient');
          }
          seen.set(key, [...(seen.get(key) ?? []), seq]);
        } finally {
          inFlight--;
        }
      },
      { groupId, keyedConcurrency: 8 },
    );
    await waitFor('all records', () => [...seen.values()].reduce((n, v) => n + v.length, 0) === keys.length * perKey);
    for (const key of keys) expect(seen.get(key)).toEqual([...Array(perKey).keys()]);
    expect(failedOnce).toBe(true);
    expect(maxInFlight).toBeGreaterThan(1);
    // everything was committed: a new consumer in the same group gets nothing
    await t.close();
    const again = newTransport();
    const late: IncomingRecord[] = [];
    await again.subscribe(topic, async (r) => void late.push(r), { groupId });
    await again.publish(topic, [{ key: 'marker', value: { key: 'marker', seq: 0 } }]);
    await waitFor('the marker', () => late.length > 0);
    expect(late.map((r) => r.key)).toEqual(['marker']);
  });

  describe('batch handler', () => {
    const noPerRecord = async () => {
      throw new Error('the per-record handler must not be called when a batch handler is given');
    };

    it('hands over slices of a partition in offset order, keeps each key in order, commits once all are done', async () => {
      const { topic, groupId } = unique('batch-order');
      const t = newTransport();
      const keys = Array.from({ length: 8 }, (_, i) => `key-${i}`);
      const perKey = 50;
      for (let seq = 0; seq < perKey; seq += 10) {
        await t.publish(topic, keys.flatMap((key) => Array.from({ length: 10 }, (_, j) => ({ key, value: { key, seq: seq + j } }))));
      }
      const calls: IncomingRecord[][] = [];
      await t.subscribe(topic, noPerRecord, {
        groupId,
        maxBatchRecords: 64,
        batchHandler: async (records) => {
          calls.push(records);
          return records.map((): RecordOutcome => ({ kind: 'ok' }));
        },
      });
      const total = keys.length * perKey;
      await waitFor('all records', () => calls.reduce((n, c) => n + c.length, 0) === total);
      const seen = calls.flat();
      expect(seen).toHaveLength(total); // each once
      for (const key of keys) expect(seen.filter((r) => r.key === key).map((r) => (r.value as { seq: number }).seq)).toEqual([...Array(perKey).keys()]);
      for (const call of calls) {
        expect(call.length).toBeLessThanOrEqual(64);
        expect(new Set(call.map((r) => r.partition)).size).toBe(1); // one partition per call
        const offsets = call.map((r) => BigInt(r.offset!));
        expect(offsets.every((o, i) => i === 0 || o > offsets[i - 1])).toBe(true); // offset order
      }
      expect(Math.max(...calls.map((c) => c.length))).toBeGreaterThan(1); // records really came in batches

      // everything was committed: a new consumer in the same group gets only what is published later
      await t.close();
      const again = newTransport();
      const late: IncomingRecord[] = [];
      await again.subscribe(topic, noPerRecord, { groupId, batchHandler: async (records) => (late.push(...records), records.map(() => ({ kind: 'ok' as const }))) });
      await again.publish(topic, [{ key: 'marker', value: { key: 'marker', seq: 0 } }]);
      await waitFor('the marker', () => late.length > 0);
      await sleep(300);
      expect(late.map((r) => r.key)).toEqual(['marker']);
    });

    it('dead-letters poison outcomes and non-JSON values with the reason, and handles the rest of the slice', async () => {
      const { topic, groupId } = unique('batch-poison');
      const t = newTransport();
      await t.publish(topic, [0, 1, 2].map((n) => ({ key: 'same', value: { n }, headers: { 'x-trace': `t${n}` } })));
      await publishNotJson(topic);
      await t.publish(topic, [3, 4].map((n) => ({ key: 'same', value: { n } })));

      const handled: number[] = [];
      const handedOver: unknown[] = [];
      const deadLettered: Array<{ offset?: string; reason: string }> = [];
      let poisonOffset: string | undefined;
      await t.subscribe(topic, noPerRecord, {
        groupId,
        batchHandler: async (records) =>
          records.map((r): RecordOutcome => {
            handedOver.push(r.value);
            const { n } = r.value as { n: number };
            if (n === 1) {
              poisonOffset = r.offset;
              return { kind: 'poison', reason: 'status of an unknown message' };
            }
            handled.push(n);
            return { kind: 'ok' };
          }),
        onDeadLetter: (record, reason) => void deadLettered.push({ offset: record.offset, reason }),
      });
      await waitFor('the records after the poison ones', () => handled.includes(4));
      await waitFor('both dead letters', () => deadLettered.length === 2);
      expect(handled).toEqual([0, 2, 3, 4]);
      expect(handedOver).not.toContain('not json {'); // never handed to the handler
      expect(deadLettered).toHaveLength(2);
      expect(deadLettered.map((d) => d.reason)).toEqual(expect.arrayContaining(['status of an unknown message', expect.stringMatching(/^value is not JSON/)]));

      const dlq = await readDeadLetters(topic, groupId, 2);
      const byValue = new Map(dlq.map((d) => [d.value, d.headers]));
      expect(byValue.get(JSON.stringify({ n: 1 }))).toEqual({
        'x-trace': 't1',
        'x-dlq-reason': 'status of an unknown message',
        'x-original-topic': topic,
        'x-original-partition': expect.any(String),
        'x-original-offset': poisonOffset,
      });
      expect(byValue.get('not json {')).toMatchObject({ 'x-dlq-reason': expect.stringMatching(/^value is not JSON/), 'x-original-topic': topic });
    });

    it('hands the retry records again, alone and in order, and a throwing handler the whole slice: nothing lost or skipped', async () => {
      const { topic, groupId } = unique('batch-retry');
      const t = newTransport({ retryInitialMs: 20 });
      // one key per partition would not be guaranteed: one key, so the whole topic is one ordered lane
      await t.publish(topic, Array.from({ length: 20 }, (_, n) => ({ key: 'k', value: { n } })));
      const calls: number[][] = [];
      const applied: number[] = [];
      let threw = false;
      let retried = 0;
      await t.subscribe(topic, noPerRecord, {
        groupId,
        maxBatchRecords: 10,
        batchHandler: async (records) => {
          const ns = records.map((r) => (r.value as { n: number }).n);
          calls.push(ns);
          if (ns.includes(15) && !threw) {
            threw = true;
            throw new Error('event store unavailable'); // nothing of this call counts
          }
          // n=5 fails twice: it and the records after it (same key) are answered retry, the ones before it are done
          const failAt = ns.indexOf(5);
          const failing = failAt >= 0 && retried++ < 2;
          return ns.map((n, i): RecordOutcome => {
            if (failing && i >= failAt) return { kind: 'retry', error: new Error('busy') };
            applied.push(n);
            return { kind: 'ok' };
          });
        },
      });
      await waitFor('all records', () => applied.length === 20);
      expect(applied).toEqual([...Array(20).keys()]); // each applied once, in order
      // the call that failed at 5 is followed by calls of its retry records only (5 and the rest of its slice)
      const firstWith5 = calls.findIndex((c) => c.includes(5));
      const slice = calls[firstWith5];
      expect(calls[firstWith5 + 1]).toEqual(slice.slice(slice.indexOf(5)));
      expect(calls[firstWith5 + 2]).toEqual(slice.slice(slice.indexOf(5)));
      // the call that threw is handed again whole
      const threwAt = calls.findIndex((c) => c.includes(15));
      expect(calls[threwAt + 1]).toEqual(calls[threwAt]);
      expect(calls.every((c) => c.length <= 10)).toBe(true);
    });

    it('stopped while records are being retried: the done ones are committed, the unfinished ones come to the next consumer', async () => {
      const { topic, groupId } = unique('batch-stop');
      const t = newTransport({ retryInitialMs: 200 });
      await t.publish(topic, Array.from({ length: 6 }, (_, n) => ({ key: 'k', value: { n } })));
      const applied: number[] = [];
      let failures = 0;
      const sub = await t.subscribe(topic, noPerRecord, {
        groupId,
        batchHandler: async (records) =>
          records.map((r): RecordOutcome => {
            const { n } = r.value as { n: number };
            if (n >= 3) {
              failures++;
              return { kind: 'retry', error: new Error('down') };
            }
            applied.push(n);
            return { kind: 'ok' };
          }),
      });
      await waitFor('a failure', () => failures >= 3);
      await sub.stop();
      expect(applied).toEqual([0, 1, 2]);

      const next: number[] = [];
      await newTransport().subscribe(topic, noPerRecord, {
        groupId,
        batchHandler: async (records) => records.map((r) => (next.push((r.value as { n: number }).n), { kind: 'ok' as const })),
      });
      await waitFor('the unfinished records', () => next.length >= 3);
      await sleep(300);
      expect(next).toEqual([3, 4, 5]);
    });
  });

  it('idle, arms no timer on its broker connections (kafkajs as published re-armed one about every millisecond)', async () => {
    const RequestQueue = require('kafkajs/src/network/requestQueue') as { prototype: { push(...args: unknown[]): void } };
    const queues = new Set<{ pending: unknown[]; throttleCheckTimeoutId: unknown; throttledUntil: number }>();
    const push = RequestQueue.prototype.push;
    RequestQueue.prototype.push = function (this: never, ...args: unknown[]) {
      queues.add(this);
      return push.apply(this, args);
    };
    try {
      const { topic, groupId } = unique('idle');
      const t = newTransport();
      const seen: IncomingRecord[] = [];
      await t.subscribe(topic, async (r) => void seen.push(r), { groupId });
      await t.publish(topic, [{ key: 'k', value: { n: 1 } }]);
      await waitFor('the record', () => seen.length === 1);
      for (let sample = 0; sample < 20; sample++) {
        await sleep(50);
        const armedWhileIdle = [...queues].filter((q) => q.pending.length === 0 && q.throttledUntil < Date.now() && q.throttleCheckTimeoutId !== null);
        expect({ sample, queues: queues.size, armedWhileIdle: armedWhileIdle.length }).toEqual({ sample, queues: queues.size, armedWhileIdle: 0 });
      }
      expect(queues.size).toBeGreaterThanOrEqual(2); // the producer's and the consumer's connections at least
    } finally {
      RequestQueue.prototype.push = push;
    }
  });

  it('consumes a 30,000-record backlog completely (its rate is printed; speed is measured in bench/)', async () => {
    const { topic, groupId } = unique('throughput');
    const t = newTransport();
    const total = 30_000;
    const chunk = 1_000;
    const started = Date.now();
    for (let i = 0; i < total; i += chunk) {
      await t.publish(
        topic,
        Array.from({ length: chunk }, (_, j) => ({
          key: `contact-${(i + j) % 97}`,
          value: { id: `wamid.${i + j}`, status: 'delivered', timestamp: '1700000000' },
        })),
      );
    }
    const publishSeconds = (Date.now() - started) / 1000;
    let count = 0;
    let firstAt = 0;
    await t.subscribe(
      topic,
      async () => {
        if (count === 0) firstAt = Date.now();
        count += 1;
      },
      { groupId },
    );
    await waitFor('all records', () => count === total, 55_000);
    const seconds = (Date.now() - firstAt) / 1000;
    const rate = Math.round(total / seconds);
    console.log(
      `kafka transport: consumed ${total} records in ${seconds.toFixed(2)} s (${rate}/s); published in ${publishSeconds.toFixed(2)} s (${Math.round(total / publishSeconds)}/s)`,
    );
    expect(count).toBe(total);
  }, 90_000);
});

/**
 * Writes a small consumer program for the SIGKILL test: the adapter and the port compiled with swc to
 * CommonJS in `dir`, plus the child script. Returns the child script's path.
 */
function compileAdapterFor(dir: string): string {
  const swc = require('@swc/core') as typeof import('@swc/core');
  const adapter = readdirSync(join(ROOT, 'src/adapters/kafka')).filter((f) => f.endsWith('.ts')).map((f) => `src/adapters/kafka/${f}`);
  for (const rel of ['src/ports/transport.ts', ...adapter]) {
    const out = join(dir, rel.replace(/\.ts$/, '.js'));
    mkdirSync(dirname(out), { recursive: true });
    const { code } = swc.transformFileSync(join(ROOT, rel), {
      swcrc: false,
      jsc: { parser: { syntax: 'typescript' }, target: 'es2022' },
      module: { type: 'commonjs' },
    });
    writeFileSync(out, code);
  }
  const child = join(dir, 'crashing-consumer.js');
  if (!existsSync(child)) {
    writeFileSync(
      child,
      `const { appendFileSync, readFileSync } = require('node:fs');
const { KafkaTransport } = require('./src/adapters/kafka/transport.js');
const [brokers, topic, groupId, effectsFile, deliveriesFile, crashAt] = process.argv.slice(2);
const quiet = { info() {}, warn() {}, error() {}, debug() {} };
const t = new KafkaTransport({ brokers: brokers.split(','), clientId: 'crashing-consumer', logger: quiet, sessionTimeoutMs: 6000 });
t.subscribe(topic, async (r) => {
  const id = r.value.id;
  appendFileSync(deliveriesFile, id + '\\n');
  const applied = new Set(readFileSync(effectsFile, 'utf8').split('\\n'));
  if (!applied.has(id)) appendFileSync(effectsFile, id + '\\n');
  if (id === crashAt) process.kill(process.pid, 'SIGKILL');
}, { groupId }).catch((e) => { console.error(e); process.exit(1); });
setTimeout(() => { console.error('the crash never came'); process.exit(2); }, 30000).unref();
`,
    );
  }
  return child;
}
