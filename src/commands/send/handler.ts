// The single template send (POST /api/v1/platform-templates/send/). Loads what the decider and the
// components builder validate against (number, template, quota: read models), records the request, calls
// the provider, records its answer, and returns once the read models have applied it (read-your-writes).
import { randomUUID } from 'node:crypto';
import type { Services } from '../../services';
import type { AppendResult, Position, StreamAppend } from '../../ports/event-store';
import { type SendEvent, UNCLASSIFIED_SEND_FAILURE } from '../../events/sends';
import { isProviderError, mayHaveReachedProvider, type ProviderError } from '../../ports/provider';
import { normalizePhone, sendPhoneProblem } from '../../shared/phone';
import { againOnLostConnection } from '../../shared/retry';
import { DomainError } from '../decider';
import { baseMetadata, type CommandContext } from '../handle';
import { sendCatalogOf } from './catalog';
import { buildComponents, type FieldMessages, type TemplateShape } from './components';
import { outboundTemplateMessage } from '../../events/template-messages';
import { conversationStreamId } from '../conversation/decider';
import { type SendCommand, sendDecider, sendStreamId, type SendState } from './decider';
import { deterministicUuid } from './ids';
import { type QuotaHolds, sendQuotaGateOf } from './quota-gate';

export interface SendTemplateInput {
  companyId: number;
  /** metadata actor (the API key id) */
  actor: string;
  correlationId?: string;
  phoneNumberId: string;
  templateName: string;
  language: string;
  recipientPhone: string;
  variables: Record<string, unknown>;
  buttonVariables: Record<string, unknown>;
  /**
   * The request's Idempotency-Key and the fingerprint of its request: the send becomes crash-safe per (company, key),
   * and its stream is the key's record (./keyed.ts)
   */
  idempotency?: SendIdempotency;
  /** what the quota gate admitted this request with, given back when it is answered (./send-template.ts) */
  quotaHolds?: QuotaHolds;
}

export interface SendIdempotency {
  key: string;
  /** what a repeat under the key must match: the SHA-256 (hex) of the request as the HTTP layer computes it */
  fingerprint: string;
}

export interface SendTemplateOutput {
  sendId: string;
  providerMessageId: string;
  /** ISO 8601: when the accepted send was recorded */
  sentAt: string;
  /** a keyed send answered from what an earlier request under the key recorded */
  replayed?: true;
}

/**
 * Why a send was not made. The HTTP route maps `code` to a status: NUMBER_NOT_FOUND / TEMPLATE_NOT_FOUND 404,
 * TEMPLATE_NOT_APPROVED 400, INVALID_FIELDS 400 (per-field messages), QUOTA_EXCEEDED 429,
 * PROVIDER_REFUSED 422, PROVIDER_UNAVAILABLE 502.
 */
export type SendFailureCode =
  | 'NUMBER_NOT_FOUND'
  | 'TEMPLATE_NOT_FOUND'
  | 'TEMPLATE_NOT_APPROVED'
  | 'INVALID_FIELDS'
  | 'QUOTA_EXCEEDED'
  | 'PROVIDER_REFUSED'
  | 'PROVIDER_UNAVAILABLE'
  | 'OUTCOME_UNKNOWN'
  | 'SEND_INTERRUPTED'
  | 'IDEMPOTENCY_KEY_REUSED'
  | 'IDEMPOTENCY_KEY_IN_FLIGHT';

export class SendRefusedError extends DomainError {
  /** a keyed send's refusal answered from what an earlier request under the key recorded */
  replayed = false;
  /** IDEMPOTENCY_KEY_IN_FLIGHT: seconds until the first request stops counting as in flight (LEASE_MS from its request) */
  retryAfterS?: number;

  constructor(
    override readonly code: SendFailureCode,
    message: string,
    readonly fields?: FieldMessages,
  ) {
    super(code, message);
    this.name = 'SendRefusedError';
  }
}

/** An unkeyed send: a fresh send id, request and answer appended together. */
export async function sendUnkeyed(services: Services, input: SendTemplateInput): Promise<SendTemplateOutput> {
  const valid = await validateSend(services, input);
  return sendValidated(services, input, valid, randomUUID());
}

export const sendContextOf = (services: Services, input: SendTemplateInput, sendId: string): CommandContext => ({
  actor: input.actor,
  companyId: input.companyId,
  correlationId: input.correlationId ?? sendId,
  now: services.now,
});

export function sendRequestOf(input: SendTemplateInput, valid: ValidSend, sendId: string) {
  const { number, template, recipientE164, now } = valid;
  return {
    sendId,
    companyId: input.companyId,
    numberId: number.id,
    phoneNumberId: input.phoneNumberId,
    templateId: template.id,
    templateName: template.name,
    language: template.language,
    category: template.category,
    recipientPhone: input.recipientPhone,
    recipientE164,
    variables: input.variables,
    buttonVariables: input.buttonVariables,
    requestedAt: now.toISOString(),
    ...(input.idempotency ? { requestFingerprint: input.idempotency.fingerprint } : {}),
  };
}

export type ValidSend = Awaited<ReturnType<typeof validateSend>>;

/** Validates a send's recipient, then against the catalog, the template's variables and the quota; throws SendRefusedError. */
export async function validateSend(services: Services, input: SendTemplateInput) {
  const now = services.now();
  // a field, so checked first (docs/sends.md, "Order of checks"); the route checked its format
  const phoneProblem = sendPhoneProblem(input.recipientPhone);
  if (phoneProblem !== undefined) throw new SendRefusedError('INVALID_FIELDS', phoneProblem, { recipient_phone: [phoneProblem] });

  const found = await sendCatalogOf(services).find(input.companyId, input.phoneNumberId, input.templateName, input.language);
  if (!found) throw new SendRefusedError('NUMBER_NOT_FOUND', `Phone number '${input.phoneNumberId}' not found for this business account.`);
  const { number, template } = found;
  if (!template) {
    throw new SendRefusedError(
      'TEMPLATE_NOT_FOUND',
      `Template '${input.templateName}' (language '${input.language}') not found for this business account.`,
    );
  }
  if (template.status !== 'APPROVED') {
    throw new SendRefusedError(
      'TEMPLATE_NOT_APPROVED',
      `Template '${input.templateName}' (language '${input.language}') is not approved (status ${template.status}).`,
    );
  }
  const built = buildComponents(template as TemplateShape, input.variables, input.buttonVariables);
  if (!built.ok) throw new SendRefusedError('INVALID_FIELDS', 'invalid template variables', built.errors);

  const recipientE164 = normalizePhone(input.recipientPhone) ?? input.recipientPhone;
  // TIER_UNLIMITED can always send: no need to count its window.
  if (number.messagingLimitTier !== 'TIER_UNLIMITED') {
    if (!input.quotaHolds) throw new Error('a send to a tiered number needs quota holds (sendTemplate gives them)');
    const refused = await sendQuotaGateOf(services).admit(input.quotaHolds, {
      numberId: number.id, tier: number.messagingLimitTier, recipient: recipientE164, now,
    });
    if (refused) {
      throw new SendRefusedError(
        'QUOTA_EXCEEDED',
        `Messaging quota exhausted for phone number '${input.phoneNumberId}': ${refused.used} of ${refused.dailyLimit} unique recipients in the last 24 h (${number.messagingLimitTier}).`,
      );
    }
  }
  return { number, template, components: built.components, recipientE164, now };
}

/**
 * Records the request, calls the provider and records its answer. Unkeyed (`requestRecorded` false): the request
 * and the answer are appended together at `no_stream`. Keyed: the request is already in the stream (revision 0,
 * appended before the call), so only the answer is appended, at revision 0; a conflict there means a provider
 * status recorded the acceptance first (see ./reconcile.ts), which the caller then reads.
 */
export async function sendValidated(
  services: Services,
  input: SendTemplateInput,
  valid: ValidSend,
  sendId: string,
  requestRecorded = false,
): Promise<SendTemplateOutput> {
  const { template, recipientE164 } = valid;
  const streamId = sendStreamId(sendId);
  const ctx = sendContextOf(services, input, sendId);
  const request = sendRequestOf(input, valid, sendId);
  // The stream is new and only this call writes it: the decider runs on the initial state and the request is
  // appended together with the provider's answer, in one append at `no_stream` (one commit on the hot path;
  // a concurrent writer would still be caught by the revision check). See docs/sends.md for this decision.
  const requested: SendCommand = { type: 'RequestTemplateSend', data: request };
  const decideSend = (commands: SendCommand[]) => {
    let state: SendState = sendDecider.initialState();
    const events: SendEvent[] = [];
    for (const c of commands) {
      const decided = sendDecider.decide(c, state);
      for (const e of decided) state = sendDecider.evolve(state, e);
      events.push(...decided);
    }
    const metadata = baseMetadata(ctx);
    const skip = requestRecorded ? 1 : 0;
    return {
      events: events.slice(skip),
      append: {
        streamId,
        events: events
          .map((e, i) => ({ type: e.type, data: e.data, metadata: { ...metadata, eventId: deterministicUuid('send-event', `${sendId}:${i}`) } }))
          .slice(skip),
        expected: requestRecorded ? 0n : ('no_stream' as const),
      },
    };
  };
  const decideAndAppend = async (commands: SendCommand[]) => {
    const { events, append } = decideSend(commands);
    const result = await services.store.append(append.streamId, append.events, append.expected);
    for (const e of events) services.metrics.eventsAppended.labels(e.type).inc();
    return { events, position: result.position as Position | undefined };
  };

  let providerMessageId: string;
  try {
    ({ providerMessageId } = await services.provider.sendTemplate({
      phoneNumberId: input.phoneNumberId,
      to: input.recipientPhone,
      template: template.name,
      language: template.language,
      components: valid.components,
      ...(requestRecorded ? { clientReference: sendId } : {}),
    }));
  } catch (err) {
    const pe: ProviderError | undefined = isProviderError(err) ? err : undefined;
    if (!pe) services.logger.error({ err, sendId }, 'provider call failed unexpectedly');
    // A keyed send's recorded request stays unanswered when the provider may have the message: its first status
    // completes it (./reconcile.ts), and until then a retry answers "outcome unknown" instead of sending again.
    if (requestRecorded && mayHaveReachedProvider(err)) {
      services.logger.warn({ sendId, code: pe?.code }, 'keyed send: the provider may have the message, outcome unknown');
      // its recipient counts in the quota for the 24 h from the request (the reservation kept: docs/sends.md, "Quota gate")
      await input.quotaHolds?.keepForOutcomeUnknown(request);
      throw new SendRefusedError('OUTCOME_UNKNOWN', `The provider did not answer (${pe?.code ?? UNCLASSIFIED_SEND_FAILURE}): the message may have been sent. Retry with the same Idempotency-Key later to learn its outcome.`);
    }
    const code = pe?.code ?? UNCLASSIFIED_SEND_FAILURE;
    const message = pe?.message ?? 'the provider could not be reached';
    const retryable = pe ? pe.retryable : true;
    const rejected = await decideAndAppend([
      requested,
      { type: 'RecordSendRejected', data: { sendId, code, message, retryable, at: services.now().toISOString() } },
    ]);
    await services.runner.waitForEvents(rejected.position, rejected.events.map((e) => e.type));
    throw retryable
      ? new SendRefusedError('PROVIDER_UNAVAILABLE', `The provider is unavailable (${code}): ${message}`)
      : new SendRefusedError('PROVIDER_REFUSED', `The provider refused the message (${code}): ${message}`);
  }

  const acceptedAt = services.now().toISOString();
  const outbound = outboundTemplateMessage({
    companyId: input.companyId,
    phoneNumberId: input.phoneNumberId,
    templateName: template.name,
    language: template.language,
    recipientE164,
    variables: input.variables,
    providerMessageId,
    at: acceptedAt,
  });
  // The send's request and answer and the chat history's outbound message: one append of both streams (one
  // statement, one commit, all or nothing on Postgres).
  const accepted = decideSend([requested, { type: 'RecordSendAccepted', data: { sendId, providerMessageId, at: acceptedAt } }]);
  const appends: StreamAppend[] = [
    accepted.append,
    {
      streamId: conversationStreamId(input.companyId, outbound.conversationId),
      events: [{
        type: 'MessageRecorded',
        data: outbound,
        metadata: {
          eventId: deterministicUuid('send-outbound-message', sendId),
          correlationId: ctx.correlationId!,
          causationId: null,
          companyId: input.companyId,
          actor: input.actor,
          at: acceptedAt,
        },
      }],
      expected: 'any',
    },
  ];
  let results: AppendResult[];
  try {
    results = await services.store.appendMany(appends);
  } catch (err) {
    // nothing more on the success path: the retry is only reached from here (docs/sends.md, 2026-11-28)
    if (requestRecorded) throw err;
    // an unkeyed send's record of an accepted message, appended again when its connection was lost: unrecorded, the
    // message the customer got was in no status record, quota or chat history (review 13). Its event ids are
    // deterministic, so a first try that committed (its answer lost) is recognised (alreadyAppended), never stored twice
    const ids = { sendId, providerMessageId };
    results = await againOnLostConnection(err, () => services.store.appendMany(appends), (lost, attempt) => {
      services.logger.warn({ err: lost, attempt, ...ids }, 'appending the accepted send failed (connection lost); trying again');
    }).catch((last: unknown) => {
      services.logger.error({ err: last, ...ids }, 'the provider accepted the message but its record could not be appended');
      throw last;
    });
  }
  const [sendResult, recorded] = results;
  for (const e of accepted.events) services.metrics.eventsAppended.labels(e.type).inc();
  if (!recorded.alreadyAppended) services.metrics.eventsAppended.labels('MessageRecorded').inc();
  // Read-your-writes: wait for every read model fed by either stream (status record, quota, chat history).
  const last = services.store.comparePositions(sendResult.position, recorded.position) > 0 ? sendResult.position : recorded.position;
  await services.runner.waitForEvents(last, [...accepted.events.map((e) => e.type), 'MessageRecorded']);
  return { sendId, providerMessageId, sentAt: acceptedAt };
}

