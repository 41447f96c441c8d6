import type { PoolClient } from 'pg';
import type { RecordedEvent } from '../../ports/event-store';
import { type Projection, serialPast } from '../projection';
import { queryNamed } from '../../shared/tx';
import type { SendEvent } from '../../events/sends';
import type { ProvisioningEvent } from '../../events/provisioning';

export const SENDS_SCHEMA = 'rm_sends';

/**
 * Single-send status records (GET /platform-templates/messages/{id}/), the provider-id index the delivery
 * consumer uses to find the owner of a notification, and the sending numbers (provider phone number id →
 * company) for inbound messages.
 *
 * `sends.id` is the spec's integer id, assigned in event order by the insert itself (recordRequestsAndAcceptances),
 * so a rolled-back batch and a redelivered request take none and a rebuild assigns the same ids (docs/core.md).
 * `provider_messages` is the owner index: kind 'send' rows come from TemplateSendAccepted; other kinds
 * (bulk recipients) can be added by handling their events here, the consumer dispatches on `kind`.
 */
export const sendsProjection: Projection = {
  name: 'sends',
  version: 1,
  schema: SENDS_SCHEMA,
  handles: [
    'TemplateSendRequested', 'TemplateSendAccepted', 'TemplateSendRejected', 'DeliveryStatusRecorded',
    'PhoneNumberRegistered', 'PhoneNumberDetailsChanged',
  ],
  ddl: `
    CREATE TABLE IF NOT EXISTS sends (
      id                   bigserial PRIMARY KEY,
      send_id              text NOT NULL UNIQUE,
      company_id           integer NOT NULL,
      number_id            integer NOT NULL,
      phone_number_id      text NOT NULL,
      template_id          integer NOT NULL,
      template_name        text NOT NULL,
      language             text NOT NULL,
      category             text NOT NULL,
      recipient_phone      text NOT NULL,
      recipient_e164       text NOT NULL,
      variables            jsonb NOT NULL,
      button_variables     jsonb NOT NULL,
      requested_at         timestamptz NOT NULL,
      provider_message_id  text UNIQUE,
      was_successful       boolean,
      error_message        text,
      status               text NOT NULL DEFAULT 'pending',
      sent_at              timestamptz,
      delivered_at         timestamptz,
      read_at              timestamptz,
      failed_at            timestamptz,
      status_error_code    text,
      status_error_message text
    );
    CREATE INDEX IF NOT EXISTS sends_company ON sends (company_id, requested_at);
    CREATE TABLE IF NOT EXISTS provider_messages (
      provider_message_id text PRIMARY KEY,
      kind                text NOT NULL,
      stream_id           text NOT NULL,
      company_id          integer NOT NULL
    );
    CREATE TABLE IF NOT EXISTS numbers (
      number_id       integer PRIMARY KEY,
      phone_number_id text NOT NULL,
      company_id      integer NOT NULL
    );
    CREATE INDEX IF NOT EXISTS numbers_provider_id ON numbers (phone_number_id);`,
  async apply(tx, event) {
    const e = { type: event.type, data: event.data } as SendEvent | ProvisioningEvent;
    switch (e.type) {
      case 'TemplateSendRequested':
        await recordRequestsAndAcceptances(tx, [e.data], []);
        return;
      case 'TemplateSendAccepted':
        await recordRequestsAndAcceptances(tx, [], [{ d: e.data, streamId: event.streamId }]);
        return;
      case 'TemplateSendRejected': {
        const d = e.data;
        await tx.query(
          `UPDATE sends SET was_successful = false, error_message = $2, status = 'failed', failed_at = $3,
                            status_error_code = $4, status_error_message = $2
            WHERE send_id = $1 AND status = 'pending'`,
          [d.sendId, d.message, d.rejectedAt, d.code],
        );
        return;
      }
      case 'DeliveryStatusRecorded':
        await recordStatuses(tx, [e.data]);
        return;
      case 'PhoneNumberRegistered':
      case 'PhoneNumberDetailsChanged': {
        const d = e.data;
        await tx.query(
          `INSERT INTO numbers (number_id, phone_number_id, company_id) VALUES ($1, $2, $3)
           ON CONFLICT (number_id) DO UPDATE SET phone_number_id = EXCLUDED.phone_number_id, company_id = EXCLUDED.company_id`,
          [d.numberId, d.phoneNumberId, d.companyId],
        );
        return;
      }
      default:
        return;
    }
  },
  /**
   * Sends' events in set form: the requests and provider answers of the batch in one statement, the statuses in
   * rounds (the k-th status of every send of the batch in round k, one update per round,
   * so one send's statuses keep their order). A send's events follow its lifecycle (requested, then accepted or
   * rejected, then statuses), so applying each kind for every send before the next kind leaves the rows the
   * one-by-one `apply` leaves. Number events are applied one by one.
   */
  async applyBatch(tx, events) {
    const requested: Requested[] = [];
    const accepted: Accepted[] = [];
    const rejected: RecordedEvent[] = [];
    const rounds: Array<Array<Extract<SendEvent, { type: 'DeliveryStatusRecorded' }>['data']>> = [];
    const statusesSeen = new Map<string, number>();
    const others: RecordedEvent[] = [];
    for (const event of events) {
      const e = { type: event.type, data: event.data } as SendEvent;
      switch (e.type) {
        case 'TemplateSendRequested': requested.push(e.data); break;
        case 'TemplateSendAccepted': accepted.push({ d: e.data, streamId: event.streamId }); break;
        case 'TemplateSendRejected': rejected.push(event); break;
        case 'DeliveryStatusRecorded': {
          const k = statusesSeen.get(e.data.sendId) ?? 0;
          statusesSeen.set(e.data.sendId, k + 1);
          (rounds[k] ??= []).push(e.data);
          break;
        }
        default: others.push(event);
      }
    }
    for (const event of others) await sendsProjection.apply(tx, event);
    await recordRequestsAndAcceptances(tx, requested, accepted);
    for (const event of rejected) await sendsProjection.apply(tx, event);
    for (const round of rounds) await recordStatuses(tx, round);
  },
};

type Requested = Extract<SendEvent, { type: 'TemplateSendRequested' }>['data'];
type Accepted = { d: Extract<SendEvent, { type: 'TemplateSendAccepted' }>['data']; streamId: string };

/**
 * Requests and provider answers in one statement. A request new to the table is inserted already answered when
 * its answer is in the same batch (ids: the highest id plus the rank in the batch's order of the requests really
 * new, the column's sequence moved past them for an earlier version's process, `serialPast`); an answer
 * to a send requested earlier updates its pending row (the update sees the table as it was before this statement,
 * so never a row the insert adds). The first answer of a send wins, as one by one: a later one finds it no longer
 * pending. Every answer's provider message id is mapped to its send.
 */
async function recordRequestsAndAcceptances(tx: PoolClient, requests: Requested[], answers: Accepted[]): Promise<void> {
  if (requests.length === 0 && answers.length === 0) return;
  const firstAnswers = [...new Map([...answers].reverse().map((a) => [a.d.sendId, a])).values()];
  await queryNamed(tx, 'sends_record_requests_and_acceptances',
    `WITH u AS (
       SELECT * FROM unnest($1::text[], $2::int[], $3::int[], $4::text[], $5::int[], $6::text[], $7::text[], $8::text[], $9::text[],
                            $10::text[], $11::jsonb[], $12::jsonb[], $13::timestamptz[]) WITH ORDINALITY
         AS u(send_id, company_id, number_id, phone_number_id, template_id, template_name, language, category,
              recipient_phone, recipient_e164, variables, button_variables, requested_at, ord)
     ), a AS (
       SELECT * FROM unnest($14::text[], $15::text[], $16::timestamptz[]) AS a(send_id, pmid, at)
     ), inserted AS (
       INSERT INTO sends (id, send_id, company_id, number_id, phone_number_id, template_id, template_name, language, category,
                          recipient_phone, recipient_e164, variables, button_variables, requested_at,
                          provider_message_id, was_successful, status, sent_at)
       SELECT (SELECT COALESCE(max(m.id), 0) FROM sends m) + row_number() OVER (ORDER BY u.ord),
              u.send_id, u.company_id, u.number_id, u.phone_number_id, u.template_id, u.template_name, u.language, u.category,
              u.recipient_phone, u.recipient_e164, u.variables, u.button_variables, u.requested_at,
              a.pmid, CASE WHEN a.send_id IS NOT NULL THEN true END, CASE WHEN a.send_id IS NOT NULL THEN 'sent' ELSE 'pending' END, a.at
         FROM u LEFT JOIN a ON a.send_id = u.send_id
        WHERE NOT EXISTS (SELECT 1 FROM sends s WHERE s.send_id = u.send_id)
        ORDER BY u.ord
       RETURNING id
     ), updated AS (
       UPDATE sends s SET provider_message_id = a.pmid, was_successful = true, error_message = NULL, status = 'sent', sent_at = a.at
         FROM a
        WHERE s.send_id = a.send_id AND s.status = 'pending'
       RETURNING 1
     ), mapped AS (
       INSERT INTO provider_messages (provider_message_id, kind, stream_id, company_id)
       SELECT * FROM unnest($17::text[], $18::text[], $19::text[], $20::int[])
       ON CONFLICT (provider_message_id) DO NOTHING
       RETURNING 1
     )
     SELECT (SELECT count(*) FROM inserted) AS inserted, (SELECT count(*) FROM updated) AS updated, (SELECT count(*) FROM mapped) AS mapped,
            ${serialPast('sends', 'id', '(SELECT max(id) FROM inserted)')} AS serial`,
    [
      requests.map((d) => d.sendId), requests.map((d) => d.companyId), requests.map((d) => d.numberId), requests.map((d) => d.phoneNumberId),
      requests.map((d) => d.templateId), requests.map((d) => d.templateName), requests.map((d) => d.language), requests.map((d) => d.category),
      requests.map((d) => d.recipientPhone), requests.map((d) => d.recipientE164), requests.map((d) => JSON.stringify(d.variables)),
      requests.map((d) => JSON.stringify(d.buttonVariables)), requests.map((d) => d.requestedAt),
      firstAnswers.map((a) => a.d.sendId), firstAnswers.map((a) => a.d.providerMessageId), firstAnswers.map((a) => a.d.acceptedAt),
      answers.map((a) => a.d.providerMessageId), answers.map(() => 'send'), answers.map((a) => a.streamId), answers.map((a) => a.d.companyId),
    ],
  );
}

/** Statuses of distinct sends (a round) in one statement: each moves its send forward only (sent < delivered < read; failed). */
async function recordStatuses(tx: PoolClient, round: Array<Extract<SendEvent, { type: 'DeliveryStatusRecorded' }>['data']>): Promise<void> {
  await queryNamed(tx, 'sends_record_statuses',
    `UPDATE sends s
        SET status = u.status,
            delivered_at = CASE u.status WHEN 'delivered' THEN u.at WHEN 'read' THEN COALESCE(s.delivered_at, u.at) ELSE s.delivered_at END,
            read_at = CASE WHEN u.status = 'read' THEN u.at ELSE s.read_at END,
            failed_at = CASE WHEN u.status = 'failed' THEN u.at ELSE s.failed_at END,
            status_error_code = CASE WHEN u.status = 'failed' THEN u.code ELSE s.status_error_code END,
            status_error_message = CASE WHEN u.status = 'failed' THEN u.message ELSE s.status_error_message END
       FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[], $5::text[]) AS u(send_id, status, at, code, message)
      WHERE s.send_id = u.send_id
        AND CASE u.status WHEN 'delivered' THEN s.status IN ('pending', 'sent')
                          WHEN 'read' THEN s.status IN ('pending', 'sent', 'delivered')
                          WHEN 'failed' THEN s.status IN ('pending', 'sent', 'delivered')
                          ELSE false END`,
    [round.map((d) => d.sendId), round.map((d) => d.status), round.map((d) => d.at), round.map((d) => d.errorCode), round.map((d) => d.errorMessage)],
  );
}
