import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import type { EventStore } from '../../ports/event-store';
import type { WebhookEventType } from '../../events/webhooks';
import { DomainError } from '../decider';
import { executeCommand, type ReadModelWaiter } from '../handle';
import { deterministicUuid } from '../send/ids';
import { type Command, PREVIOUS_SECRET_GRACE_MS, webhookEndpointDecider, webhookEndpointStream } from './decider';
import { isFromAnEarlierUseByBoth, keyedIdSeed, repeatClock } from '../../shared/idempotency-key';
import { databaseNow } from '../../shared/database-now';
import { generateWebhookSecret, type SecretBox, secretBox } from './secrets';
import { countWebhookEndpoints } from '../../projections/webhooks/queries';
import type { Services } from '../../services';
import { waitingForSessionLock } from '../../shared/tx';

export interface WebhookEndpointDeps {
  store: EventStore;
  waiter: ReadModelWaiter;
  box: SecretBox;
  now: () => Date;
  /** Postgres's clock, which a keyed creation's repeat also judges the key's 24 h by (repeatClock) */
  databaseNow: () => Promise<Date>;
  /**
   * Runs a creation of the company's endpoints given how many it has (read model), in the company's turn: one
   * creation of a company at a time, across processes, so each counts what the ones before it made.
   */
  creationTurn<T>(companyId: number, create: (endpointsOfCompany: number) => Promise<T>): Promise<T>;
  maxEndpointsPerCompany: number;
}

/** The dependencies as the service wires them (the routes and the sender). */
export const webhookEndpointDepsOf = (services: Services): WebhookEndpointDeps => ({
  store: services.store, waiter: services.runner, box: secretBox(services.secrets.apiKeyPepper), now: services.now,
  databaseNow: () => databaseNow(services.pool),
  creationTurn: creationTurns(services.pool),
  maxEndpointsPerCompany: services.config.webhooks.maxEndpointsPerCompany,
});

/**
 * The companies' creation turns: a creation waits for the one before it in this process (so a company's burst holds
 * one connection, not one each), then takes the company's advisory lock for the other processes, and holds it while
 * it counts, appends and waits for the read model. Found in review, 2026-11-27: creations racing each other counted
 * the same endpoints and passed the limit by their number. At most TURNS_AT_ONCE companies' turns run at once in a
 * process: each holds a pooled connection for its lock while its append and the read model's catch-up need others,
 * so as many companies creating at once as the pool has connections took them all and waited for each other until
 * the pool's timeout (found in review, 2026-11-27, 16:00).
 */
function creationTurns(pool: Pool): WebhookEndpointDeps['creationTurn'] {
  const last = new Map<number, Promise<unknown>>();
  const running = new TurnsAtOnce(TURNS_AT_ONCE);
  return (companyId, create) => {
    const turn = (last.get(companyId) ?? Promise.resolve())
      .catch(() => undefined)
      .then(() => running.run(() => withCompanyCreationLock(pool, companyId, create)));
    last.set(companyId, turn);
    turn.catch(() => undefined).finally(() => {
      if (last.get(companyId) === turn) last.delete(companyId);
    });
    return turn;
  };
}

const TURNS_AT_ONCE = 2;

/** Runs at most `limit` functions at once, the others in arrival order. */
class TurnsAtOnce {
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly limit: number) {}

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((ok) => this.waiting.push(ok));
    else this.active++;
    try {
      return await fn();
    } finally {
      const next = this.waiting.shift();
      if (next) next(); // the slot passes on as it is
      else this.active--;
    }
  }
}

const withCompanyCreationLock = <T>(pool: Pool, companyId: number, create: (endpointsOfCompany: number) => Promise<T>): Promise<T> =>
  waitingForSessionLock(pool, `webhook-endpoint-creations:${companyId}`, async (lock) => create(await countWebhookEndpoints(lock, companyId)));

type Actor = { actor: string; companyId: number };

const run = (deps: WebhookEndpointDeps, endpointId: string, command: Command, who: Actor) =>
  executeCommand(deps, webhookEndpointStream(endpointId), webhookEndpointDecider, command, { ...who, now: deps.now });

/** The endpoint id of a creation under an Idempotency-Key, in the key's `use` (docs/idempotency.md). */
export const keyedEndpointId = (companyId: number, key: string, use = 0): string =>
  deterministicUuid('idempotency:webhook-endpoint', keyedIdSeed(companyId, key, use));

/**
 * Registers an endpoint; returns its id and the clear secret (shown to the client once). Under an Idempotency-Key
 * the id comes from the key, so a creation run again after a crash finds the endpoint it created and returns its
 * current secret instead of registering a second one; an endpoint the key made 24 h or more ago belongs to an
 * earlier use of the key, which now registers a new one under its next use.
 */
export async function createWebhookEndpoint(
  deps: WebhookEndpointDeps,
  who: Actor,
  input: { url: string; eventTypes: WebhookEventType[]; description: string | null },
  idempotencyKey?: string,
): Promise<{ endpointId: string; secret: string }> {
  const secret = generateWebhookSecret();
  const sealedSecret = deps.box.seal(secret);
  return deps.creationTurn(who.companyId, async (endpointsOfCompany) => {
    const limit = { endpointsOfCompany, maxEndpoints: deps.maxEndpointsPerCompany };
    // by both clocks: a repeat on a process ahead of the writer's registers no second endpoint (regression review 19)
    const clock = repeatClock(deps.now, deps.databaseNow);
    for (let use = 0; ; use++) {
      const endpointId = idempotencyKey === undefined ? randomUUID() : keyedEndpointId(who.companyId, idempotencyKey, use);
      const command: Command = { type: 'CreateEndpoint', endpointId, companyId: who.companyId, ...input, secret: sealedSecret, now: deps.now(), ...limit };
      const result = await run(deps, endpointId, command, who);
      if (result.events.length > 0) return { endpointId, secret };
      const stored = await deps.store.readStream(webhookEndpointStream(endpointId));
      const created = stored.find((e) => e.type === 'WebhookEndpointCreated')?.data as { createdAt: string } | undefined;
      if (created && (await isFromAnEarlierUseByBoth(created.createdAt, clock))) continue;
      const sealed = stored.filter((e) => e.type === 'WebhookEndpointCreated' || e.type === 'WebhookEndpointSecretRotated').at(-1)?.data as { secret: string };
      await deps.waiter.waitForEvents(stored.at(-1)!.position, stored.map((e) => e.type));
      return { endpointId, secret: deps.box.open(sealed.secret) };
    }
  });
}

export async function updateWebhookEndpoint(
  deps: WebhookEndpointDeps,
  who: Actor,
  endpointId: string,
  change: { url?: string; eventTypes?: WebhookEventType[]; description?: string | null; enabled?: boolean },
): Promise<void> {
  await run(deps, endpointId, { type: 'UpdateEndpoint', ...change, now: deps.now() }, who);
}

/**
 * A new secret; the previous one keeps signing for 24 h. Returns the clear new secret. Under an Idempotency-Key the
 * n-th rotation's secret is derived from (company, endpoint, key, n), so a rotation run again after a crash (made,
 * its answer never recorded) finds its own secret in the endpoint's last rotation and answers it instead of rotating
 * a second time, which would end the previous secret's 24 h at once.
 */
export async function rotateWebhookSecret(deps: WebhookEndpointDeps, who: Actor, endpointId: string, idempotencyKey?: string): Promise<string> {
  if (idempotencyKey === undefined) {
    const secret = generateWebhookSecret();
    await run(deps, endpointId, { type: 'RotateSecret', secret: deps.box.seal(secret), now: deps.now() }, who);
    return secret;
  }
  for (let attempt = 1; ; attempt++) {
    try {
      return await rotateKeyed(deps, who, endpointId, idempotencyKey);
    } catch (err) {
      // another rotation landed between the read and the append: the secret was made for a stale count
      if (!(err instanceof DomainError && err.code === 'ROTATION_RACED') || attempt === MAX_ROTATION_RACES) throw err;
    }
  }
}

const MAX_ROTATION_RACES = 10;

async function rotateKeyed(deps: WebhookEndpointDeps, who: Actor, endpointId: string, idempotencyKey: string): Promise<string> {
  const rotations = (await deps.store.readStream(webhookEndpointStream(endpointId))).filter((e) => e.type === 'WebhookEndpointSecretRotated');
  const keyed = (n: number) => deps.box.derive(`${who.companyId}:${endpointId}:${n}:${idempotencyKey}`);
  const last = rotations.at(-1);
  if (last) {
    const { secret, previousSecretValidUntil } = last.data as { secret: string; previousSecretValidUntil: string };
    const rotatedAt = Date.parse(previousSecretValidUntil) - PREVIOUS_SECRET_GRACE_MS;
    const itsSecret = keyed(rotations.length - 1);
    // by both clocks, as a creation's repeat (regression review 19): a repeat ahead of the writer rotates no second time
    const ofThisUse = async () => !(await isFromAnEarlierUseByBoth(new Date(rotatedAt).toISOString(), repeatClock(deps.now, deps.databaseNow)));
    if (deps.box.open(secret) === itsSecret && (await ofThisUse())) {
      await deps.waiter.waitForEvents(last.position, [last.type]);
      return itsSecret;
    }
  }
  const secret = keyed(rotations.length);
  await run(deps, endpointId, { type: 'RotateSecret', secret: deps.box.seal(secret), now: deps.now(), rotationsBefore: rotations.length }, who);
  return secret;
}

export async function deleteWebhookEndpoint(deps: WebhookEndpointDeps, who: Actor, endpointId: string): Promise<void> {
  await run(deps, endpointId, { type: 'DeleteEndpoint', now: deps.now() }, who);
}

/**
 * The delivery worker's disable: the endpoint answered 410, or failed every attempt for 5 days. Whether this call
 * disabled it (false: it was disabled or deleted already).
 */
export async function disableFailingEndpoint(deps: WebhookEndpointDeps, companyId: number, endpointId: string, reason: 'gone' | 'failing'): Promise<boolean> {
  const result = await run(deps, endpointId, { type: 'DisableEndpoint', reason, now: deps.now() }, { actor: 'system', companyId });
  return result.events.length > 0;
}
