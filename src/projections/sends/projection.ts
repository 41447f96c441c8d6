import type { Projection } from '../projection';
import type { SendEvent } from '../../events/sends';
import type { ProvisioningEvent } from '../../events/provisioning';

export const SENDS_SCHEMA = 'rm_sends';

/**
 * Single-send status records (GET /platform-templates/messages/{id}/), the provider-id index the delivery
 * consumer uses to find the owner of a notification, and the sending numbers (provider phone number id →
 * company) for inbound messages.
 *
 * `sends.id` is the spec's integer id: a serial assigned in event order (never burnt by a redelivered
 * event: the insert only draws a value when the row is new), so a rebuild assigns the same ids.
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
      case 'TemplateSendRequested': {
        const d = e.data;
        await tx.query(
          `INSERT INTO sends (send_id, company_id, number_id, phone_number_id, template_id, template_name, language, category,
                              recipient_phone, recipient_e164, variables, button_variables, requested_at)
           SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13
            WHERE NOT EXISTS (SELECT 1 FROM sends WHERE send_id = $1)`,
          [d.sendId, d.companyId, d.numberId, d.phoneNumberId, d.templateId, d.templateName, d.language, d.category,
            d.recipientPhone, d.recipientE164, JSON.stringify(d.variables), JSON.stringify(d.buttonVariables), d.requestedAt],
        );
        return;
      }
      case 'TemplateSendAccepted': {
        const d = e.data;
        await tx.query(
          `UPDATE sends SET provider_message_id = $2, was_successful = true, error_message = NULL, status = 'sent', sent_at = $3
            WHERE send_id = $1 AND status = 'pending'`,
          [d.sendId, d.providerMessageId, d.acceptedAt],
        );
        await tx.query(
          `INSERT INTO provider_messages (provider_message_id, kind, stream_id, company_id) VALUES ($1, 'send', $2, $3)
           ON CONFLICT (provider_message_id) DO NOTHING`,
          [d.providerMessageId, event.streamId, d.companyId],
        );
        return;
      }
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
      case 'DeliveryStatusRecorded': {
        const d = e.data;
        if (d.status === 'delivered') {
          await tx.query(
            `UPDATE sends SET status = 'delivered', delivered_at = $2 WHERE send_id = $1 AND status IN ('pending', 'sent')`,
            [d.sendId, d.at],
          );
        } else if (d.status === 'read') {
          await tx.query(
            `UPDATE sends SET status = 'read', read_at = $2, delivered_at = COALESCE(delivered_at, $2)
              WHERE send_id = $1 AND status IN ('pending', 'sent', 'delivered')`,
            [d.sendId, d.at],
          );
        } else {
          await tx.query(
            `UPDATE sends SET status = 'failed', failed_at = $2, status_error_code = $3, status_error_message = $4
              WHERE send_id = $1 AND status IN ('pending', 'sent', 'delivered')`,
            [d.sendId, d.at, d.errorCode, d.errorMessage],
          );
        }
        return;
      }
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
};
