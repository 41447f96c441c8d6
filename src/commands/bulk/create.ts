// Creating a bulk send (POST /api/v1/platform-templates/send-bulk/), docs/bulk.md "Creation".
// 1. Every recipient is checked (shape, phone format; then variables against the template) before anything is
//    stored: one bad recipient rejects the request and is named by its index.
// 2. Repeated phones are removed (the first occurrence wins).
// 3. The recipients are appended to chunk streams (`bulkchunk-{id}-{n}`, ≤ 1,000 recipients and ≤ 256 KiB each:
//    ./chunks.ts), the dispatcher's job row is inserted as a draft, then BulkSendCreated is appended to `bulk-{id}`: the commit point. The job
//    becomes `queued` and the local dispatchers are woken. A crash before the commit point leaves invisible
//    chunks and a draft the lease sweep deletes; a crash after it leaves a draft the sweep promotes (and a failed
//    promotion is answered 202 all the same: the sweep promotes it; promoteJob).
// 4. The response waits for the bulk read model (read-your-writes).
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import type { BulkEventData } from '../../events/bulk';
import type { EventToAppend, Position, RecordedEvent } from '../../ports/event-store';
import {
  findNumberByProviderId,
  findTemplate,
  type MessagingTier,
  type NumberRecord,
  QUOTA_WINDOW_MS,
  quotaOf,
  recommendedSpacingMs,
} from '../../projections/accounts/queries';
import type { Services } from '../../services';
import { ReadModelTimeoutError } from '../../ports/read-models';
import { isFromAnEarlierUseByBoth, keyedIdSeed, repeatClock } from '../../shared/idempotency-key';
import { databaseNow } from '../../shared/database-now';
import { phoneVariants } from '../../shared/phone';
import { againOnLostConnection, isLostConnection } from '../../shared/retry';
import { DomainError } from '../decider';
import { handleCommand } from '../handle';
import type { FieldMessages, TemplateShape } from '../send/components';
import { deterministicUuid } from '../send/ids';
import { chunkStarts } from './chunks';
import { bulkDecider, bulkStreamId, chunkStreamId } from './decider';
import { mapInTurns, Turns } from '../../shared/turns';
import { checkRecipientsInTurns, checkVariablesAndDeduplicate } from './input';
import { kickDispatchers } from './signals';
import { insertDraftJob, setJobState } from './work';

export type BulkFailureCode =
  | 'INVALID_FIELDS'
  | 'NUMBER_NOT_FOUND'
  | 'TEMPLATE_NOT_FOUND'
  | 'TEMPLATE_NOT_APPROVED'
  | 'BULK_NOT_FOUND'
  | 'BULK_FINISHED';

/** Why a bulk command was refused; the HTTP routes map `code` to a status (docs/bulk.md, "Errors"). */
export class BulkRefusedError extends DomainError {
  constructor(
    override readonly code: BulkFailureCode,
    message: string,
    readonly fields?: FieldMessages,
  ) {
    super(code, message);
    this.name = 'BulkRefusedError';
  }
}

export interface CreateBulkInput {
  companyId: number;
  /** the API key id (event metadata actor) */
  actor: string;
  /** the key's user: `created_by` */
  userId: number | null;
  phoneNumberId: string;
  templateName: string;
  language: string;
  /** as submitted; checked here */
  recipients: readonly unknown[];
  /**
   * The request's Idempotency-Key: the bulk id is derived from (company, key), so running the creation again after
   * a crash finds what the first run stored (docs/idempotency.md).
   */
  idempotencyKey?: string;
}

export interface CreatedBulk {
  bulkId: string;
  taskId: string;
  templateName: string;
  totalRecipients: number;
  uniqueRecipients: number;
  estimatedTimeMinutes: number;
  createdAt: string;
  number: NumberRecord;
  quota: { canSend: boolean; needed: number; available: number; total: number; tier: string };
}

/** Minutes to send `count` recipients at the tier's recommended spacing (0 for TIER_UNLIMITED), 2 decimals. */
export const estimateMinutes = (count: number, spacingMs: number): number => Math.round(((count * spacingMs) / 60_000) * 100) / 100;

/**
 * The bulk id of a keyed creation: the same (company, Idempotency-Key) names the same bulk send for as long as the
 * key lasts (its `use`: docs/idempotency.md).
 */
export const keyedBulkId = (companyId: number, key: string, use = 0): string => deterministicUuid('idempotency:send-bulk', keyedIdSeed(companyId, key, use));

/**
 * The bulk id of this use of the key, and the bulk send it already created if a run of this use got past the commit
 * point (it crashed before its answer was recorded). A bulk the key created 24 h or more ago belongs to an earlier
 * use of the key (expired since): this request is a new one, under the next use.
 */
async function keyedCreation(services: Services, companyId: number, key: string, now: Date): Promise<{ bulkId: string; created?: RecordedEvent }> {
  // by both clocks: a repeat on a process ahead of the writer's must not take the bulk for an earlier use's (a
  // second bulk, every recipient messaged twice: regression review 19)
  const clock = repeatClock(() => now, () => databaseNow(services.pool));
  for (let use = 0; ; use++) {
    const bulkId = keyedBulkId(companyId, key, use);
    const created = (await services.store.readStream(bulkStreamId(bulkId))).find((e) => e.type === 'BulkSendCreated');
    if (!created) return { bulkId };
    if (!(await isFromAnEarlierUseByBoth((created.data as BulkEventData<'BulkSendCreated'>).createdAt, clock))) return { bulkId, created };
  }
}

/**
 * A keyed creation run again (its first run crashed after the commit point, before its answer was recorded): the
 * bulk send it created, made dispatchable if the crash left its job a draft. No second bulk, no second dispatch.
 */
async function alreadyCreated(
  services: Services,
  bulkId: string,
  created: RecordedEvent,
  number: NumberRecord,
  quota: { canSend: boolean; remaining: number; dailyLimit: number },
): Promise<CreatedBulk> {
  const data = created.data as BulkEventData<'BulkSendCreated'>;
  await promoteJob(services, bulkId);
  await services.runner.waitForEvents(created.position, ['BulkSendCreated'], 10_000).catch((err) => {
    if (!(err instanceof ReadModelTimeoutError)) throw err;
  });
  return {
    bulkId,
    taskId: data.taskId,
    templateName: data.templateName,
    totalRecipients: data.totalRecipients,
    uniqueRecipients: data.uniqueRecipients,
    estimatedTimeMinutes: estimateMinutes(data.uniqueRecipients, recommendedSpacingMs(data.tier as MessagingTier)),
    createdAt: data.createdAt,
    number,
    quota: { canSend: quota.canSend, needed: data.uniqueRecipients, available: quota.remaining, total: quota.dailyLimit, tier: data.tier },
  };
}

/**
 * The job's promotion from draft to queued, after the commit point (BulkSendCreated is in the log): the bulk send
 * exists and will be sent whatever happens here, so a failure of the promotion (a lost connection) is logged and left
 * to the lease sweep, which promotes a draft whose BulkSendCreated exists (src/workers/bulk-lease-cron.ts, after
 * 2 minutes), and the creation is answered 202. Before (review 13) it answered 500 for a bulk that was then sent:
 * an unkeyed client retrying the 500 messaged every recipient twice (docs/bulk.md, 2026-11-28).
 */
async function promoteJob(services: Services, bulkId: string): Promise<void> {
  try {
    await setJobState(services.pool, bulkId, 'queued', services.now(), ['draft']);
  } catch (err) {
    services.logger.error({ err, bulkId }, 'bulk send created, its job could not be queued: the lease sweep queues it');
    return;
  }
  kickDispatchers();
}

/**
 * The commit point (BulkSendCreated), its append tried again when its connection was lost under it (isLostConnection).
 * Such an append may have committed, its answer lost with the connection: the lease sweep then promotes the draft and
 * sends the bulk, so a 500 here made an unkeyed client's retry message every recipient twice (regression review 14,
 * docs/bulk.md 2026-11-28). The stream is read first: a BulkSendCreated there is this creation's (its bulk id is this
 * request's), and the creation goes on from it; else the append is made again (at `no_stream`: never twice).
 */
async function commitCreation(services: Services, bulkId: string, append: () => Promise<{ position: Position | undefined }>): Promise<{ position: Position | undefined }> {
  const lookThenAppend = async () => {
    const stored = (await services.store.readStream(bulkStreamId(bulkId))).find((e) => e.type === 'BulkSendCreated');
    return stored ? { position: stored.position } : append();
  };
  return append().catch((first: unknown) => againOnLostConnection(
    first,
    lookThenAppend,
    (err, attempt) => services.logger.warn({ err, bulkId, attempt }, 'bulk send creation: the commit point\'s connection was lost; looking for it, then trying again'),
    // a retry's BULK_EXISTS: the stream was made meanwhile, the next look finds it
    (err, retried) => isLostConnection(err) || (retried > 0 && isBulkExists(err)),
  )).catch((last: unknown) => {
    services.logger.error({ err: last, bulkId }, 'bulk send creation: its commit point could not be appended');
    throw last;
  });
}

const isBulkExists = (err: unknown): boolean => err instanceof DomainError && err.code === 'BULK_EXISTS';

/** Chunk appends running at once. */
const APPEND_CONCURRENCY = 4;

/** How many of the recipients were sent to in the quota window, under either spelling (the window keeps E.164 forms). */
async function recipientsInWindow(pool: Pool, numberId: number, recipients: readonly { phone: string }[], now: Date, turns: Turns): Promise<number> {
  const phones = await mapInTurns(recipients, (r) => r.phone, turns);
  const others = await mapInTurns(phones, (p) => phoneVariants(p)[1] ?? null, turns);
  const r = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM unnest($3::text[], $4::text[]) AS p(phone, other)
      WHERE EXISTS (SELECT 1 FROM rm_accounts.quota_recipients q
                     WHERE q.number_id = $1 AND q.last_sent_at > $2 AND q.recipient IN (p.phone, p.other))`,
    [numberId, new Date(now.getTime() - QUOTA_WINDOW_MS), phones, others],
  );
  return r.rows[0].n;
}

export async function createBulkSend(services: Services, input: CreateBulkInput): Promise<CreatedBulk> {
  const { pool } = services;
  const now = services.now();

  // The recipients' loops (shape, variables, normalization and deduplication: seconds for 100,000) give the event loop
  // a turn between slices, so the process's other requests are not held meanwhile (docs/bulk.md, "Event loop").
  const turns = new Turns();
  const checked = await checkRecipientsInTurns(input.recipients, turns);
  if (!checked.ok) throw new BulkRefusedError('INVALID_FIELDS', 'invalid recipients', { recipients: checked.messages });

  const number = await findNumberByProviderId(pool, input.companyId, input.phoneNumberId);
  if (!number) throw new BulkRefusedError('NUMBER_NOT_FOUND', `Phone number '${input.phoneNumberId}' not found for this business account.`);
  const template = await findTemplate(pool, number.id, input.templateName, input.language);
  if (!template) {
    throw new BulkRefusedError(
      'TEMPLATE_NOT_FOUND',
      `Template '${input.templateName}' (language '${input.language}') not found for this business account.`,
    );
  }
  if (template.status !== 'APPROVED') {
    throw new BulkRefusedError(
      'TEMPLATE_NOT_APPROVED',
      `Template '${input.templateName}' (language '${input.language}') is not approved (status ${template.status}).`,
    );
  }
  const shape: TemplateShape = { variables: template.variables, buttons: template.buttons };
  // variables against the template, then repeated phones removed: one pass
  const deduplicated = await checkVariablesAndDeduplicate(shape, checked.recipients, turns);
  if (!deduplicated.ok) throw new BulkRefusedError('INVALID_FIELDS', 'invalid recipient variables', { recipients: deduplicated.messages });

  const { recipients, total, unique } = deduplicated;
  const tier = number.messagingLimitTier;
  const quota = await quotaOf(pool, number.id, tier, now);
  const needed = tier === 'TIER_UNLIMITED' ? unique : unique - (await recipientsInWindow(pool, number.id, recipients, now, turns));

  let bulkId: string = randomUUID();
  if (input.idempotencyKey !== undefined) {
    const keyed = await keyedCreation(services, input.companyId, input.idempotencyKey, now);
    if (keyed.created) return alreadyCreated(services, keyed.bulkId, keyed.created, number, quota);
    bulkId = keyed.bulkId;
    // a draft job left by a run cut short is replaced by this run's (the lease sweep deletes stale drafts)
    await pool.query(`DELETE FROM bulk_work.jobs WHERE bulk_id = $1 AND state = 'draft'`, [bulkId]);
  }
  const taskId = deterministicUuid('bulk-task', bulkId);
  const createdAt = now.toISOString();
  const sizes = await mapInTurns(recipients, (r) => Buffer.byteLength(JSON.stringify([r.phone, r.variables ?? null, r.buttonVariables ?? null])), turns);
  const starts = chunkStarts(sizes);
  const chunkCount = starts.length;
  const metadata = (eventId: string) => ({
    eventId, correlationId: bulkId, causationId: null, companyId: input.companyId, actor: input.actor, at: createdAt,
  });

  // 1. the recipients, chunk by chunk (each a new stream)
  let next = 0;
  const appendChunks = async () => {
    for (let chunk = next++; chunk < chunkCount; chunk = next++) {
      const first = starts[chunk];
      const slice = recipients.slice(first, starts[chunk + 1] ?? recipients.length);
      const data: BulkEventData<'BulkRecipientsAdded'> = {
        bulkId, companyId: input.companyId, chunk,
        recipients: slice.map((r, i) => ({ index: first + i, phone: r.phone, variables: r.variables, buttonVariables: r.buttonVariables })),
      };
      const event: EventToAppend = { type: 'BulkRecipientsAdded', data, metadata: metadata(deterministicUuid('bulk-chunk', `${bulkId}:${chunk}`)) };
      await services.store.append(chunkStreamId(bulkId, chunk), [event], 'no_stream');
    }
  };
  await Promise.all(Array.from({ length: Math.min(APPEND_CONCURRENCY, chunkCount) }, appendChunks));

  // 2. the dispatcher's job, not claimable yet
  await insertDraftJob(pool, {
    bulkId, taskId, companyId: input.companyId, numberId: number.id, phoneNumberId: number.phoneNumberId, templateName: template.name,
    language: template.language, template: shape, chunkCount, recipientCount: unique, createdAt: now,
  });

  // 3. the commit point
  const created = await commitCreation(services, bulkId, () => handleCommand(
    services.store,
    bulkStreamId(bulkId),
    bulkDecider,
    {
      type: 'CreateBulkSend',
      data: {
        bulkId, taskId, companyId: input.companyId, createdByUserId: input.userId, numberId: number.id, phoneNumberId: number.phoneNumberId,
        displayPhoneNumber: number.displayPhoneNumber, verifiedName: number.verifiedName, tier, templateId: template.id,
        templateName: template.name, language: template.language, category: template.category, templateStatus: template.status,
        template: { variables: shape.variables as never, buttons: shape.buttons as never },
        totalRecipients: total, uniqueRecipients: unique, chunkCount, createdAt,
      },
    },
    { actor: input.actor, companyId: input.companyId, correlationId: bulkId, now: services.now },
  ));
  await promoteJob(services, bulkId);

  // 4. read-your-writes (a slow read model does not turn an accepted bulk into an error)
  try {
    await services.runner.waitForEvents(created.position, ['BulkSendCreated', 'BulkRecipientsAdded'], 10_000 + unique / 5);
  } catch (err) {
    if (!(err instanceof ReadModelTimeoutError)) throw err;
    services.logger.warn({ bulkId }, 'bulk read model is late: answering before it shows the new bulk send');
  }

  return {
    bulkId,
    taskId,
    templateName: template.name,
    totalRecipients: total,
    uniqueRecipients: unique,
    estimatedTimeMinutes: estimateMinutes(unique, recommendedSpacingMs(tier)),
    createdAt,
    number,
    quota: { canSend: quota.canSend, needed, available: quota.remaining, total: quota.dailyLimit, tier },
  };
}
