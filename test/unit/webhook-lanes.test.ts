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
});
