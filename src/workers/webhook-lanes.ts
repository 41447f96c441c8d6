import type { ClaimedDelivery } from '../projections/webhooks/deliveries';
import type { SendingEndpoint } from '../projections/webhooks/queries';

// The sender's deliveries in hand, one lane per endpoint (docs/webhooks.md, "Fairness"): an endpoint has at most
// its limit of requests in flight, the rest of its deliveries wait in its lane, and an endpoint holding that many
// is full: the sender claims and takes no more of its deliveries until it has room, so a slow or timing-out
// endpoint with a backlog holds its own lane and no other endpoint's. The limit is `perEndpoint` until the endpoint
// fails: each failed answer (no answer, or not 2xx) halves it, down to 1, and each success doubles it back, so an
// endpoint that stopped answering soon holds one request (a probe) instead of `perEndpoint` timing out. A failed
// answer with Retry-After pauses the endpoint: none of its deliveries is started until then.

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

/** A lane holds at most this many times its limit (in flight and waiting): its last delivery is posted within two timeouts. */
export const HELD_PER_LIMIT = 3;
/** endpoints remembered as narrowed at most (the oldest is forgotten first: back at perEndpoint) */
const MAX_NARROWED = 10_000;

export class EndpointLanes {
  private readonly lanes = new Map<string, Lane>();
  /** the full endpoints, and what they hold */
  private readonly full = new Set<string>();
  /** the endpoints whose limit is below perEndpoint, and their limit */
  private readonly narrowed = new Map<string, number>();
  /** the endpoints paused by a Retry-After (the sender resumes each) */
  private readonly paused = new Set<string>();
  private heldCount = 0;
  private heldByFull = 0;
  private inFlightCount = 0;

  /** `onFullChange`: +1 when an endpoint becomes full, -1 when it has room again */
  constructor(
    private readonly perEndpoint: number,
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

  /** the requests in flight the endpoint may have: perEndpoint, or less after failed answers */
  limitOf(endpointId: string): number {
    return this.narrowed.get(endpointId) ?? this.perEndpoint;
  }

  /** An answer of the endpoint (`ok`: 2xx): a success doubles its limit, up to perEndpoint; a failure halves it, down to 1. */
  answered(endpointId: string, ok: boolean): void {
    const before = this.limitOf(endpointId);
    const after = ok ? Math.min(this.perEndpoint, before * 2) : Math.max(1, Math.floor(before / 2));
    if (after === before) return;
    this.narrowed.delete(endpointId);
    if (after < this.perEndpoint) {
      this.narrowed.set(endpointId, after);
      if (this.narrowed.size > MAX_NARROWED) this.narrowed.delete(this.narrowed.keys().next().value!);
    }
    const lane = this.lanes.get(endpointId);
    if (lane) this.changeHeld(endpointId, lane, () => {}); // whether it is full follows its limit
  }

  /** No delivery of the endpoint is started until it is resumed; paused, it is full (claims pass it over). */
  pause(endpointId: string): void {
    this.paused.add(endpointId);
    const lane = this.lanes.get(endpointId);
    if (lane) this.changeHeld(endpointId, lane, () => {});
  }

  resume(endpointId: string): void {
    if (!this.paused.delete(endpointId)) return;
    const lane = this.lanes.get(endpointId);
    if (lane) this.changeHeld(endpointId, lane, () => {}); // whether it is full follows its limit again
  }

  /**
   * How many deliveries a claim may add to each narrowed endpoint that has room, where that is fewer than `claimSize`:
   * up to HELD_PER_LIMIT times its limit held in all. (A claim adds at most `claimSize` to an endpoint that is not
   * full; at perEndpoint that keeps it within the same bound.)
   */
  claimCaps(claimSize: number): { endpointIds: string[]; rooms: number[] } {
    const endpointIds: string[] = [];
    const rooms: number[] = [];
    for (const [id, limit] of this.narrowed) {
      if (this.full.has(id)) continue; // passed over by the claim
      const room = HELD_PER_LIMIT * limit - this.heldBy(id);
      if (room >= claimSize) continue;
      endpointIds.push(id);
      rooms.push(room);
    }
    return { endpointIds, rooms };
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

  /** the endpoint's next delivery to post, counted in flight, if it has a request to spare and is not paused */
  startNext(endpointId: string): HeldDelivery | undefined {
    const lane = this.lanes.get(endpointId);
    if (!lane || lane.inFlight >= this.limitOf(endpointId) || this.paused.has(endpointId)) return undefined;
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
    if (after >= this.limitOf(id) || (after > 0 && this.paused.has(id))) {
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
