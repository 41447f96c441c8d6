// kafkajs's per-connection request queue with src/adapters/kafka/request-queue-idle-fix.ts installed: idle, it arms
// no timer (the version as published re-armed one about every millisecond); requests held back by a throttle or by
// the in-flight limit still go out when they may. Fake timers: Date.now moves only when the test moves it.
import { installRequestQueueIdleFix, PATCHED_KAFKAJS_VERSION } from '../../src/adapters/kafka/request-queue-idle-fix';

interface Queue {
  push(request: { entry: object; expectResponse: boolean; sendRequest: () => void }): void;
  fulfillRequest(response: { correlationId: number; payload: null; size: number }): void;
  maybeThrottle(ms: number): void;
  checkPendingRequests(): void;
  pending: unknown[];
  throttleCheckTimeoutId: unknown;
}
type QueueClass = new (options: object) => Queue;

const silent = { debug() {}, info() {}, warn() {}, error() {} };

describe('kafkajs request queue, with the idle fix', () => {
  let RequestQueue: QueueClass;
  let nextCorrelationId = 0;
  let sent: number[];

  const newQueue = (maxInFlightRequests: number | null = null) =>
    new RequestQueue({ maxInFlightRequests, requestTimeout: 30_000, enforceRequestTimeout: false, clientId: 'test', broker: 'b:9092', logger: silent });
  /** pushes a request; returns its correlation id (recorded in `sent` when the queue sends it) */
  const push = (queue: Queue): number => {
    const correlationId = nextCorrelationId++;
    const entry = { correlationId, apiKey: 0, apiName: 'Produce', apiVersion: 0, resolve() {}, reject() {} };
    queue.push({ entry, expectResponse: true, sendRequest: () => void sent.push(correlationId) });
    return correlationId;
  };
  const answer = (queue: Queue, correlationId: number) => queue.fulfillRequest({ correlationId, payload: null, size: 0 });

  beforeAll(() => {
    expect(installRequestQueueIdleFix()).toBe('installed');
    RequestQueue = require('kafkajs/src/network/requestQueue') as QueueClass;
  });
  beforeEach(() => {
    jest.useFakeTimers();
    sent = [];
  });
  afterEach(() => jest.useRealTimers());

  it('is installed on the kafkajs version it was written for (an upgrade must check it against the new RequestQueue)', () => {
    expect((require('kafkajs/package.json') as { version: string }).version).toBe(PATCHED_KAFKAJS_VERSION);
  });

  it('arms no timer on a connection with nothing pending, after a request is answered', () => {
    const queue = newQueue();
    const checks = jest.spyOn(queue, 'checkPendingRequests');
    const id = push(queue);
    answer(queue, id);
    expect(sent).toEqual([id]);
    expect(queue.throttleCheckTimeoutId).toBeNull();
    expect(jest.getTimerCount()).toBe(0);
    checks.mockClear();
    jest.advanceTimersByTime(1_000);
    expect(checks).not.toHaveBeenCalled();
  });

  it('sends a request held back by a throttle when the throttle ends, and then rests', () => {
    const queue = newQueue();
    queue.maybeThrottle(100);
    const id = push(queue);
    expect(sent).toEqual([]);
    jest.advanceTimersByTime(99);
    expect(sent).toEqual([]);
    jest.advanceTimersByTime(1);
    expect(sent).toEqual([id]);
    answer(queue, id);
    expect(queue.pending).toEqual([]);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('sends a request over the in-flight limit when a request in flight is answered, and then rests', () => {
    const queue = newQueue(1);
    const first = push(queue);
    const second = push(queue);
    expect(sent).toEqual([first]);
    answer(queue, first);
    expect(sent).toEqual([first, second]);
    answer(queue, second);
    jest.advanceTimersByTime(10); // the check `push` scheduled for the waiting request runs once, finds nothing
    expect(jest.getTimerCount()).toBe(0);
  });

  it('still checks every 10 ms while a request waits on the in-flight limit (kafkajs behaviour, kept)', () => {
    const queue = newQueue(1);
    const first = push(queue);
    push(queue);
    const checks = jest.spyOn(queue, 'checkPendingRequests');
    jest.advanceTimersByTime(30);
    expect(checks).toHaveBeenCalledTimes(3);
    expect(sent).toEqual([first]);
  });
});
