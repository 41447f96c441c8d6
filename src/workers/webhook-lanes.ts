import type { ClaimedDelivery } from '../projections/webhooks/deliveries';
import type { SendingEndpoint } from '../projections/webhooks/queries';

// The sender's deliveries in hand, one lane per endpoint (docs/webhooks.md, "Fairness"): an endpoint has at most
// `perEndpoint` requests in flight, the rest of its deliveries wait in its lane, and an endpoint holding that many
// is full: the sender claims and takes no more of its deliveries until it has room, so a slow or timing-out
// endpoint with a backlog holds its own lane and no other endpoint's.

export interface HeldDelivery {
  delivery: ClaimedDelivery;
  endpoint: SendingEndpoint;
  /** when the delivery is due again in the table for any sender (epoch ms): it is not posted after that */
  leaseUntil: number;
}

interface Lane {
  inFlight: number;
  waiting: HeldDelivery[];
}

export class EndpointLanes {
  private readonly lanes = new Map<string, Lane>();
  /** the full endpoints, and what they hold */
  private readonly full = new Set<string>();
  private heldCount = 0;
  private heldByFull = 0;
  private inFlightCount = 0;

  /** `onFullChange`: +1 when an endpoint becomes full, -1 when it has room again */
  constructor(
    readonly perEndpoint: number,
    private readonly onFullChange: (delta: 1 | -1) => void = () => {},
  ) {}

  /** deliveries in hand: in flight or waiting */
  get held(): number {
    return this.heldCount;
  }

  get inFlight(): number {
    return this.inFlightCount;
  }

  heldBy(endpointId: string): number {
    const lane = this.lanes.get(endpointId);
    return lane ? lane.inFlight + lane.waiting.length : 0;
  }

  isFull(endpointId: string): boolean {
    return this.full.has(endpointId);
  }

  fullEndpoints(): string[] {
    return [...this.full];
  }

  /** deliveries held by endpoints with room: what counts against the sender's budget for new work */
  heldWithRoom(): number {
    return this.heldCount - this.heldByFull;
  }

  add(held: HeldDelivery): void {
    const id = held.delivery.endpoint_id;
    let lane = this.lanes.get(id);
    if (!lane) this.lanes.set(id, (lane = { inFlight: 0, waiting: [] }));
    this.changeHeld(id, lane, () => lane.waiting.push(held));
  }

  /** the endpoint's next delivery to post, counted in flight, if it has a request to spare */
  startNext(endpointId: string): HeldDelivery | undefined {
    const lane = this.lanes.get(endpointId);
    if (!lane || lane.inFlight >= this.perEndpoint) return undefined;
    const next = lane.waiting.shift();
    if (next) {
      lane.inFlight++;
      this.inFlightCount++;
    }
    return next;
  }

  /** a request of the endpoint ended (answered, failed or not made) */
  finish(endpointId: string): void {
    const lane = this.lanes.get(endpointId);
    if (!lane || lane.inFlight === 0) return;
    this.changeHeld(endpointId, lane, () => lane.inFlight--);
    this.inFlightCount--;
  }

  /** takes the deliveries waiting (not in flight) of one endpoint, or of all */
  takeWaiting(endpointId?: string): HeldDelivery[] {
    const taken: HeldDelivery[] = [];
    for (const [id, lane] of this.lanes) {
      if (endpointId !== undefined && id !== endpointId) continue;
      this.changeHeld(id, lane, () => taken.push(...lane.waiting.splice(0)));
    }
    return taken;
  }

  /** applies a change to what a lane holds, keeping the counts, the full set and the lanes map in step */
  private changeHeld(id: string, lane: Lane, change: () => void): void {
    const before = lane.inFlight + lane.waiting.length;
    if (this.full.has(id)) this.heldByFull -= before;
    change();
    const after = lane.inFlight + lane.waiting.length;
    this.heldCount += after - before;
    const wasFull = this.full.has(id);
    if (after >= this.perEndpoint) {
      this.full.add(id);
      this.heldByFull += after;
      if (!wasFull) this.onFullChange(1);
    } else if (wasFull) {
      this.full.delete(id);
      this.onFullChange(-1);
    }
    if (after === 0) this.lanes.delete(id);
  }
}
