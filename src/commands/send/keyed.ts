// A single send made with an Idempotency-Key (docs/sends.md, "Idempotent sends"). Each attempt has its own
// deterministic stream, send-{uuid(company, key, attempt)}; the request is appended BEFORE the provider is called
// (the durable intent) and carries the send id to the provider as its client reference, so a crash between the
// provider's acceptance and the recorded answer leaves a request that a later status names (./reconcile.ts).
// A re-run of the command (the HTTP mechanism runs it again after the first claim's lease expired) never calls the
// provider for an attempt that has a request: it answers from the stream, or says the outcome is not known yet.
import type { Services } from '../../services';
import type { RecordedEvent } from '../../ports/event-store';
import { WrongExpectedRevisionError } from '../../ports/event-store';
import type { SendEvent } from '../../events/sends';
import { DomainError, fold } from '../decider';
import { baseMetadata } from '../handle';
import { INTERRUPTED, sendDecider, sendStreamId } from './decider';
import { deterministicUuid } from './ids';
import {
  SendRefusedError,
  sendContextOf,
  sendRequestOf,
  type SendTemplateInput,
  type SendTemplateOutput,
  sendValidated,
  type ValidSend,
  validateSend,
} from './handler';

/** Attempts of one key: a retryable provider failure ends an attempt, the next retry makes the next one. */
const MAX_ATTEMPTS = 100;
export const DEFAULT_OUTCOME_UNKNOWN_AFTER_MS = 600_000;
/** An Idempotency-Key is kept 24 h (docs/idempotency.md): an attempt older than that belongs to an earlier use of the key. */
export const KEY_LIFETIME_MS = 24 * 60 * 60 * 1000;

export const keyedSendId = (companyId: number, key: string, attempt: number): string =>
  deterministicUuid('idempotency:send', `${companyId}:${key}:${attempt}`);

type Answer = { kind: 'answer'; output: SendTemplateOutput } | { kind: 'next-attempt' } | { kind: 'read-again' };

export async function sendKeyed(services: Services, input: SendTemplateInput, key: string): Promise<SendTemplateOutput> {
  // Most keys are new: their first attempt records the request without reading first. A stream that exists refuses
  // that append ('no_stream'), and so does anything unusual (a refusal of validation included): then the attempts
  // are read in order below, which answers from what is recorded.
  const valid = await validateSend(services, input).catch(() => undefined);
  if (valid) {
    const first = await recordAndSend(services, input, valid, keyedSendId(input.companyId, key, 0));
    if (first.kind === 'answer') return first.output;
  }
  for (let attempt = 0; attempt < MAX_ATTEMPTS; ) {
    const sendId = keyedSendId(input.companyId, key, attempt);
    const stored = await services.store.readStream(sendStreamId(sendId));
    if (stored.length > 0 && isFromAnEarlierUse(services, stored[0])) {
      attempt++;
      continue;
    }
    const answer = stored.length === 0 ? await newAttempt(services, input, sendId) : await answerFrom(services, input, stored);
    if (answer.kind === 'answer') return answer.output;
    if (answer.kind === 'next-attempt') attempt++;
  }
  throw new SendRefusedError('PROVIDER_UNAVAILABLE', `The provider stayed unavailable for ${MAX_ATTEMPTS} attempts of this Idempotency-Key.`);
}

function isFromAnEarlierUse(services: Services, first: RecordedEvent): boolean {
  const requestedAt = first.type === 'TemplateSendRequested' ? Date.parse((first.data as { requestedAt: string }).requestedAt) : NaN;
  return services.now().getTime() - requestedAt >= KEY_LIFETIME_MS;
}

/** Validates, records the request, then calls the provider (./handler.ts records the answer). */
async function newAttempt(services: Services, input: SendTemplateInput, sendId: string): Promise<Answer> {
  return recordAndSend(services, input, await validateSend(services, input), sendId);
}

async function recordAndSend(services: Services, input: SendTemplateInput, valid: ValidSend, sendId: string): Promise<Answer> {
  const request = sendRequestOf(input, valid, sendId);
  const metadata = { ...baseMetadata(sendContextOf(services, input, sendId)), eventId: deterministicUuid('send-event', `${sendId}:0`) };
  try {
    const recorded = await services.store.append(sendStreamId(sendId), [{ type: 'TemplateSendRequested', data: request, metadata }], 'no_stream');
    // the request's event id is deterministic: the store recognises an earlier run's request instead of refusing it
    if (recorded.alreadyAppended) return { kind: 'read-again' };
  } catch (err) {
    if (err instanceof WrongExpectedRevisionError) return { kind: 'read-again' }; // another run of this key got there first
    throw err;
  }
  services.metrics.eventsAppended.labels('TemplateSendRequested').inc();
  try {
    return { kind: 'answer', output: await sendValidated(services, input, valid, sendId, true) };
  } catch (err) {
    // the answer's append lost to a status that recorded the acceptance first: the stream tells the outcome
    if (err instanceof WrongExpectedRevisionError) return { kind: 'read-again' };
    throw err;
  }
}

/** The answer an attempt's stream gives: its recorded outcome, or (no answer yet) unknown until the bound, then interrupted. */
async function answerFrom(services: Services, input: SendTemplateInput, stored: RecordedEvent[]): Promise<Answer> {
  const events = stored.map((e) => ({ type: e.type, data: e.data }) as SendEvent);
  const state = fold(sendDecider, events);
  switch (state.kind) {
    case 'none':
      return { kind: 'read-again' };
    case 'accepted': {
      const accepted = events.find((e) => e.type === 'TemplateSendAccepted')!;
      const at = accepted.type === 'TemplateSendAccepted' ? accepted.data.acceptedAt : state.request.requestedAt;
      // read-your-writes, as for a fresh send (a reconciled acceptance may not be projected yet)
      const last = stored[stored.length - 1];
      await services.runner.waitForEvents(last.position, [...new Set(stored.map((e) => e.type))]);
      return { kind: 'answer', output: { sendId: state.request.sendId, providerMessageId: state.providerMessageId, sentAt: at } };
    }
    case 'rejected': {
      const rejected = events.find((e) => e.type === 'TemplateSendRejected');
      if (rejected?.type !== 'TemplateSendRejected') return { kind: 'read-again' };
      const { code, message, retryable } = rejected.data;
      if (code === INTERRUPTED.code) throw interrupted();
      if (retryable) return { kind: 'next-attempt' };
      throw new SendRefusedError('PROVIDER_REFUSED', `The provider refused the message (${code}): ${message}`);
    }
    case 'requested': {
      const sendId = state.request.sendId;
      let decided: SendEvent[];
      try {
        decided = sendDecider.decide(
          { type: 'ResolveUnansweredSend', data: { sendId, now: services.now().toISOString(), outcomeUnknownAfterMs: outcomeUnknownAfterMs(services) } },
          state,
        );
      } catch (err) {
        if (err instanceof DomainError && err.code === 'SEND_OUTCOME_UNKNOWN') {
          throw new SendRefusedError(
            'OUTCOME_UNKNOWN',
            'The first attempt with this Idempotency-Key reached the provider but its outcome is not known yet; retry later.',
          );
        }
        throw err;
      }
      const metadata = baseMetadata(sendContextOf(services, input, sendId));
      try {
        const result = await services.store.append(
          sendStreamId(sendId),
          decided.map((e, i) => ({ type: e.type, data: e.data, metadata: { ...metadata, eventId: deterministicUuid('send-event', `${sendId}:interrupted:${i}`) } })),
          stored[stored.length - 1].revision,
        );
        if (!result.alreadyAppended) for (const e of decided) services.metrics.eventsAppended.labels(e.type).inc();
        await services.runner.waitForEvents(result.position, decided.map((e) => e.type));
      } catch (err) {
        if (err instanceof WrongExpectedRevisionError) return { kind: 'read-again' }; // a status answered it meanwhile
        throw err;
      }
      throw interrupted();
    }
  }
}

const interrupted = () =>
  new SendRefusedError('SEND_INTERRUPTED', `The first attempt with this Idempotency-Key was ${INTERRUPTED.message}: no status arrived from the provider.`);

export const outcomeUnknownAfterMs = (services: Services): number =>
  services.config.sends?.outcomeUnknownAfterMs ?? DEFAULT_OUTCOME_UNKNOWN_AFTER_MS;
