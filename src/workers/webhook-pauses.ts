import type { Pool } from 'pg';

// An endpoint's Retry-After pause, shared by the senders of every process (docs/webhooks.md, "Delivery"; migration
// 0013): written with a notification in one statement, so each sender LISTENing pauses that endpoint's lane as it
// arrives; a sender whose LISTEN (re)starts reads the pauses still running (it missed their notifications). Nothing
// is read or written while no endpoint answers with a Retry-After. Times are Postgres's: processes' clocks may differ.

export const WEBHOOK_ENDPOINT_PAUSED_CHANNEL = 'webhook_endpoint_paused';

export interface EndpointPause {
  endpointId: string;
  /** how long from now */
  ms: number;
}

/**
 * Pauses the endpoint for `ms` from now for every sender (a longer pause stays) and notifies them; the expired
 * pauses of other endpoints are deleted on the way (rows another writer holds are skipped: no wait, no deadlock).
 */
export async function sharePause(db: Pool, pause: EndpointPause): Promise<void> {
  await db.query({ name: 'webhooks_share_endpoint_pause', text: SHARE_PAUSE_SQL, values: [pause.endpointId, Math.round(pause.ms)] });
}

const SHARE_PAUSE_SQL = `WITH expired AS (
    DELETE FROM webhooks.endpoint_pauses WHERE endpoint_id IN (
      SELECT endpoint_id FROM webhooks.endpoint_pauses WHERE paused_until < now() AND endpoint_id <> $1 FOR UPDATE SKIP LOCKED)
  ), paused AS (
    INSERT INTO webhooks.endpoint_pauses (endpoint_id, paused_until) VALUES ($1, now() + $2::int * interval '1 millisecond')
    ON CONFLICT (endpoint_id) DO UPDATE SET paused_until = greatest(webhooks.endpoint_pauses.paused_until, excluded.paused_until)
  )
  SELECT pg_notify('${WEBHOOK_ENDPOINT_PAUSED_CHANNEL}', $1 || ' ' || $2::int)`;

/** The pauses still running. */
export async function runningPauses(db: Pool): Promise<EndpointPause[]> {
  const { rows } = await db.query<{ endpoint_id: string; ms: number }>(
    `SELECT endpoint_id, ceil(extract(epoch FROM paused_until - now()) * 1000)::int AS ms FROM webhooks.endpoint_pauses WHERE paused_until > now()`,
  );
  return rows.map((r) => ({ endpointId: r.endpoint_id, ms: r.ms }));
}

/** A notification's payload, `<endpointId> <ms>`; undefined when it is not one. */
export function pauseOf(payload: string | undefined): EndpointPause | undefined {
  const m = /^(\S+) (\d+)$/.exec(payload ?? '');
  return m ? { endpointId: m[1], ms: Number(m[2]) } : undefined;
}
