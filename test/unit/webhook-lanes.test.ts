import type { SendingEndpoint } from '../../src/projections/webhooks/queries';
import { EndpointLanes, type HeldDelivery } from '../../src/workers/webhook-lanes';

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

  it('keeps its counts and its full set equal to a recount of the lanes, whatever the order of operations', () => {
    let fullByListener = 0;
    const lanes = new EndpointLanes(3, (delta) => (fullByListener += delta));
    const model = new Map<string, { inFlight: number; waiting: number }>();
    let seed = 42;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) % n);
    let fullSeen = 0;
    for (let step = 0; step < 5_000; step++) {
      const id = `e${rand(4)}`;
      const m = model.get(id) ?? { inFlight: 0, waiting: 0 };
      const op = rand(20); // adds, starts, finishes and takes balanced so endpoints go in and out of full
      if (op < 4) {
        lanes.add(held(id, step));
        m.waiting++;
      } else if (op < 9) {
        if (lanes.startNext(id)) (m.waiting--, m.inFlight++);
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
      const full = [...model].filter(([, x]) => x.inFlight + x.waiting >= 3).map(([k]) => k).sort();
      const inFull = [...model].filter(([, x]) => x.inFlight + x.waiting >= 3).reduce((n, [, x]) => n + x.inFlight + x.waiting, 0);
      expect([lanes.held, lanes.inFlight, lanes.heldWithRoom(), lanes.fullEndpoints().sort(), lanes.heldBy(id), fullByListener])
        .toEqual([total, [...model.values()].reduce((n, x) => n + x.inFlight, 0), total - inFull, full, m.inFlight + m.waiting, full.length]);
    }
    expect(fullSeen).toBeGreaterThan(300); // the walk did go through full lanes
    expect(fullSeen).toBeLessThan(4_500); // and out of them
  });
});
