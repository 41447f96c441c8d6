import type { SendingEndpoint } from '../../src/projections/webhooks/queries';
import { EndpointLanes, HELD_PER_LIMIT, type HeldDelivery } from '../../src/workers/webhook-lanes';

// The sender's lanes (src/workers/webhook-lanes.ts): requests in flight per endpoint, the waiting rest, and which
// endpoints are full.

const held = (endpointId: string, n: number): HeldDelivery => ({
  delivery: { delivery_id: `${endpointId}-${n}`, endpoint_id: endpointId, webhook_id: `msg_${n}`, payload: '{}', attempts: 0 },
  endpoint: { endpointId } as SendingEndpoint,
  leaseUntil: 0,
});

describe('endpoint lanes', () => {
  it('starts at most perEndpoint requests of an endpoint, in order; the rest wait until one finishes', () => {
    const lanes = new EndpointLanes(2);
    for (let i = 0; i < 4; i++) lanes.add(held('a', i));
    lanes.add(held('b', 0));
    expect([lanes.startNext('a'), lanes.startNext('a'), lanes.startNext('a')].map((h) => h?.delivery.delivery_id)).toEqual(['a-0', 'a-1', undefined]);
    expect(lanes.startNext('b')?.delivery.delivery_id).toBe('b-0');
    expect([lanes.held, lanes.inFlight, lanes.heldBy('a')]).toEqual([5, 3, 4]);
    lanes.finish('a');
    expect(lanes.startNext('a')?.delivery.delivery_id).toBe('a-2');
    expect([lanes.held, lanes.inFlight]).toEqual([4, 3]);
  });

  it('a paused endpoint starts nothing until it is resumed, and is full meanwhile; the others are not paused', () => {
    const lanes = new EndpointLanes(4);
    for (let i = 0; i < 3; i++) lanes.add(held('a', i));
    lanes.add(held('b', 0));
    expect(lanes.isFull('a')).toBe(false);
    lanes.pause('a');
    expect(lanes.startNext('a')).toBeUndefined();
    expect(lanes.startNext('b')?.delivery.delivery_id).toBe('b-0');
    // paused, it is full: claims pass it over and what it holds counts against the full endpoints' bound
    expect([lanes.isFull('a'), lanes.heldWithRoom()]).toEqual([true, 1]);
    lanes.resume('a');
    expect([lanes.startNext('a'), lanes.startNext('a')].map((h) => h?.delivery.delivery_id)).toEqual(['a-0', 'a-1']);
    expect(lanes.isFull('a')).toBe(false);
  });

  it('an endpoint holding perEndpoint deliveries is full, and its deliveries do not count against the room of the others', () => {
    const lanes = new EndpointLanes(2);
    for (let i = 0; i < 3; i++) lanes.add(held('slow', i));
    lanes.add(held('fast', 0));
    expect(lanes.fullEndpoints()).toEqual(['slow']);
    expect([lanes.isFull('fast'), lanes.heldWithRoom()]).toEqual([false, 1]);
  });

  it("takes back one endpoint's waiting deliveries (disabled) or everyone's (stopping); those in flight stay counted until they finish", () => {
    const lanes = new EndpointLanes(1);
    for (let i = 0; i < 3; i++) lanes.add(held('a', i));
    lanes.add(held('b', 0));
    lanes.startNext('a');
    expect(lanes.takeWaiting('a').map((h) => h.delivery.delivery_id)).toEqual(['a-1', 'a-2']);
    expect([lanes.held, lanes.heldBy('a')]).toEqual([2, 1]);
    expect(lanes.takeWaiting().map((h) => h.delivery.delivery_id)).toEqual(['b-0']);
    lanes.finish('a');
    expect([lanes.held, lanes.inFlight, lanes.fullEndpoints()]).toEqual([0, 0, []]);
  });

  it("narrows an endpoint that fails: each failed answer halves its limit, down to 1; each success doubles it, up to perEndpoint", () => {
    const lanes = new EndpointLanes(8);
    const limits: number[] = [];
    for (const ok of [false, false, false, false, true, true, false, true, true, true, true]) {
      lanes.answered('a', ok);
      limits.push(lanes.limitOf('a'));
    }
    expect(limits).toEqual([4, 2, 1, 1, 2, 4, 2, 4, 8, 8, 8]);
    expect(lanes.limitOf('b')).toBe(8); // the others keep theirs
  });

  it('a narrowed endpoint starts no more than its limit, is full at it, and has room again when its limit grows', () => {
    const changes: number[] = [];
    const lanes = new EndpointLanes(4, (delta) => changes.push(delta));
    for (let i = 0; i < 3; i++) lanes.add(held('a', i));
    lanes.answered('a', false); // 2
    expect([lanes.isFull('a'), changes]).toEqual([true, [1]]);
    expect([lanes.startNext('a'), lanes.startNext('a'), lanes.startNext('a')].map((h) => h?.delivery.delivery_id)).toEqual(['a-0', 'a-1', undefined]);
    lanes.answered('a', true); // 4: holds 3
    expect([lanes.isFull('a'), changes, lanes.startNext('a')?.delivery.delivery_id]).toEqual([false, [1, -1], 'a-2']);
    lanes.answered('a', false); // 2, holding 3 in flight: full until one finishes
    expect(lanes.isFull('a')).toBe(true);
    lanes.finish('a');
    expect(lanes.isFull('a')).toBe(true);
    lanes.finish('a');
    expect([lanes.isFull('a'), changes]).toEqual([false, [1, -1, 1, -1]]);
  });

  it(`caps what a claim may add to a narrowed endpoint with room: ${HELD_PER_LIMIT} times its limit held in all`, () => {
    const lanes = new EndpointLanes(128);
    for (let i = 0; i < 6; i++) lanes.answered('narrow', false); // 2
    lanes.answered('full', false); // 64
    for (let i = 0; i < 70; i++) lanes.add(held('full', i));
    lanes.add(held('narrow', 0));
    lanes.answered('wide', false); // 64: HELD_PER_LIMIT x 64 > the claim
    expect(lanes.claimCaps(50)).toEqual({ endpointIds: ['narrow'], rooms: [HELD_PER_LIMIT * 2 - 1] });
    expect(lanes.claimCaps(200)).toEqual({ endpointIds: ['narrow', 'wide'], rooms: [HELD_PER_LIMIT * 2 - 1, HELD_PER_LIMIT * 64] });
  });

  it('keeps its counts and its full set equal to a recount of the lanes, whatever the order of operations (pauses included)', () => {
    let fullByListener = 0;
    const lanes = new EndpointLanes(3, (delta) => (fullByListener += delta));
    const model = new Map<string, { inFlight: number; waiting: number }>();
    let seed = 42;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) % n);
    let fullSeen = 0;
    const limit = new Map<string, number>();
    const limitOf = (id: string) => limit.get(id) ?? 3;
    const paused = new Set<string>();
    for (let step = 0; step < 5_000; step++) {
      const id = `e${rand(4)}`;
      const m = model.get(id) ?? { inFlight: 0, waiting: 0 };
      const op = rand(26); // adds, starts, finishes, takes, answers, pauses and resumes balanced so endpoints go in and out of full
      if (op === 22) {
        lanes.pause(id);
        paused.add(id);
      } else if (op >= 23) {
        lanes.resume(id);
        paused.delete(id);
      } else if (op >= 20) {
        const ok = op === 21;
        lanes.answered(id, ok);
        limit.set(id, ok ? Math.min(3, 2 * limitOf(id)) : Math.max(1, Math.floor(limitOf(id) / 2)));
      } else if (op < 4) {
        lanes.add(held(id, step));
        m.waiting++;
      } else if (op < 9) {
        const started = lanes.startNext(id);
        expect(started !== undefined).toBe(m.waiting > 0 && m.inFlight < limitOf(id) && !paused.has(id));
        if (started) (m.waiting--, m.inFlight++);
      } else if (op < 16) {
        lanes.finish(id);
        if (m.inFlight > 0) m.inFlight--;
      } else {
        lanes.takeWaiting(id);
        m.waiting = 0;
      }
      model.set(id, m);
      if (lanes.isFull(id)) fullSeen++;
      const total = [...model.values()].reduce((n, x) => n + x.inFlight + x.waiting, 0);
      const isFull = ([k, x]: [string, { inFlight: number; waiting: number }]) =>
        x.inFlight + x.waiting >= limitOf(k) || (x.inFlight + x.waiting > 0 && paused.has(k));
      const full = [...model].filter(isFull).map(([k]) => k).sort();
      const inFull = [...model].filter(isFull).reduce((n, [, x]) => n + x.inFlight + x.waiting, 0);
      expect([lanes.held, lanes.inFlight, lanes.heldWithRoom(), lanes.fullEndpoints().sort(), lanes.heldBy(id), fullByListener])
        .toEqual([total, [...model.values()].reduce((n, x) => n + x.inFlight, 0), total - inFull, full, m.inFlight + m.waiting, full.length]);
    }
    expect(fullSeen).toBeGreaterThan(300); // the walk did go through full lanes
    expect(fullSeen).toBeLessThan(4_500); // and out of them
  });
});
