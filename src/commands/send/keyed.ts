// A single send made with an Idempotency-Key (docs/sends.md, "Idempotent sends"; docs/idempotency.md). Each attempt
// has its own deterministic stream, send-{uuid(company, key, attempt)}, and that stream is the key's record (no key
// row for sends): the request is appended BEFORE the provider is called (the durable intent), with the request's
// fingerprint, and carries the send id to the provider as its client reference, so a crash between the provider's
// acceptance and the recorded answer leaves a request that a later status names (./reconcile.ts).
// A repeat under the key never calls the provider for an attempt that has a request: it answers from the stream
// (replayed), refuses another request under the key (IDEMPOTENCY_KEY_REUSED), waits for a request in flight and
// then refuses (IDEMPOTENCY_KEY_IN_FLIGHT), or says the outcome is not known yet.
import type { Services } from '../../services';
import type { RecordedEvent } from '../../ports/event-store';
import { WrongExpectedRevisionError } from '../../ports/event-store';
import type { SendEvent } from '../../events/sends';
import { IN_FLIGHT_POLL_MS, IN_FLIGHT_WAIT_MS, isFromAnEarlierUseByBoth, LEASE_MS, repeatClock, type RepeatClock } from '../../shared/idempotency-key';
import { databaseNow } from '../../shared/database-now';
import { canonicalJson } from '../../shared/canonical-json';
import { Wakeups } from '../../shared/wakeups';
import { DomainError, fold } from '../decider';
import { baseMetadata } from '../handle';
import { INTERRUPTED, sendDecider, sendStreamId } from './decider';
import { deterministicUuid } from './ids';
import {
  type SendIdempotency,
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
/** time allowed after the provider's answer for recording it */
const RECORDING_MARGIN_MS = 5_000;

/**
 * How long a request without an answer is taken to be in flight (its process alive and sending): LEASE_MS, or
 * longer when the provider's calls may take longer (a provider retrying slowly), so that a live send is never
 * answered as if its process had died.
 */
const inFlightMs = (services: Services): number => Math.max(LEASE_MS, (services.provider.maxCallMs ?? 0) + RECORDING_MARGIN_MS);

export const keyedSendId = (companyId: number, key: string, attempt: number): string =>
  deterministicUuid('idempotency:send', `${companyId}:${key}:${attempt}`);

type Answer =
  | { kind: 'answer'; output: SendTemplateOutput }
  | { kind: 'next-attempt' }
  | { kind: 'read-again' }
  /** the attempt's request has no answer yet and is younger than inFlightMs: its process is taken to be sending it */
  | { kind: 'in-flight'; leftMs: number };

/** repeats waiting for a request in flight, woken when its process records the answer */
const answered = new Wakeups();

export async function sendKeyed(services: Services, input: SendTemplateInput, idempotency: SendIdempotency): Promise<SendTemplateOutput> {
  const { key, fingerprint } = idempotency;
  // Most keys are new: their first attempt records the request without reading first. A stream that exists refuses
  // that append ('no_stream'), and so does anything unusual (a refusal of validation included): then the attempts
  // are read in order below, which answers from what is recorded.
  let own: string | undefined; // the attempt whose request this call appended: its answer is not a replay
  const valid = await validateSend(services, input).catch(() => undefined);
  if (valid) {
    const sendId = keyedSendId(input.companyId, key, 0);
    const first = await recordAndSend(services, input, valid, sendId);
    if (first.kind === 'answer') return first.output;
    if (first.recorded) own = sendId;
  }
  const waitUntil = Date.now() + IN_FLIGHT_WAIT_MS;
  const clock = repeatClock(services.now, () => databaseNow(services.pool));
  for (let attempt = 0; attempt < MAX_ATTEMPTS; ) {
    const sendId = keyedSendId(input.companyId, key, attempt);
    const stored = await services.store.readStream(sendStreamId(sendId));
    if (stored.length > 0 && (await isAttemptOfAnEarlierUse(clock, stored[0]))) {
      attempt++;
      continue;
    }
    let answer: Answer;
    if (stored.length === 0) {
      const made = await newAttempt(services, input, sendId);
      if (made.recorded) own = sendId;
      answer = made;
    } else {
      answer = await answerFrom(services, clock, input, stored, fingerprint, sendId !== own);
    }
    switch (answer.kind) {
      case 'answer':
        return answer.output;
      case 'next-attempt':
        attempt++;
        break;
      case 'read-again':
        break;
      case 'in-flight': {
        const left = waitUntil - Date.now();
        if (left <= 0) {
          const refused = new SendRefusedError('IDEMPOTENCY_KEY_IN_FLIGHT', 'A request with this Idempotency-Key is still being processed; retry later.');
          refused.retryAfterS = answer.leftMs / 1000;
          throw refused;
        }
        await answered.next(sendId, Math.min(left, IN_FLIGHT_POLL_MS));
      }
    }
  }
  throw new SendRefusedError('PROVIDER_UNAVAILABLE', `The provider stayed unavailable for ${MAX_ATTEMPTS} attempts of this Idempotency-Key.`);
}

const requestedAtOf = (first: RecordedEvent): number =>
  first.type === 'TemplateSendRequested' ? Date.parse((first.data as { requestedAt: string }).requestedAt) : NaN;

/** An attempt older than the key's 24 h (by both clocks) belongs to an earlier use of the key. */
const isAttemptOfAnEarlierUse = async (clock: RepeatClock, first: RecordedEvent): Promise<boolean> => {
  if (first.type !== 'TemplateSendRequested') return false;
  return isFromAnEarlierUseByBoth((first.data as { requestedAt: string }).requestedAt, clock);
};

type Made = Answer & { recorded?: boolean };

/** Validates, records the request, then calls the provider (./handler.ts records the answer). */
async function newAttempt(services: Services, input: SendTemplateInput, sendId: string): Promise<Made> {
  return recordAndSend(services, input, await validateSend(services, input), sendId);
}

/** `recorded`: this call appended the attempt's request (so the attempt is this request's own). */
async function recordAndSend(services: Services, input: SendTemplateInput, valid: ValidSend, sendId: string): Promise<Made> {
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
    if (err instanceof WrongExpectedRevisionError) return { kind: 'read-again', recorded: true };
    throw err;
  } finally {
    answered.wake(sendId);
  }
}

/** The answer an attempt's stream gives: its recorded outcome, or (no answer yet) unknown until the bound, then interrupted. */
async function answerFrom(
  services: Services,
  clock: RepeatClock,
  input: SendTemplateInput,
  stored: RecordedEvent[],
  fingerprint: string,
  replay: boolean,
): Promise<Answer> {
  const events = stored.map((e) => ({ type: e.type, data: e.data }) as SendEvent);
  const state = fold(sendDecider, events);
  if (state.kind === 'none') return { kind: 'read-again' };
  // a retryable refusal was not kept (a 5xx): the key is free for the next attempt, whatever its request
  const keyFree = state.kind === 'rejected' && events.some((e) => e.type === 'TemplateSendRejected' && e.data.retryable);
  if (!keyFree && !isSameRequest(state.request, input, fingerprint)) {
    throw new SendRefusedError('IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was already used with a different request.');
  }
  const replayed = <E extends SendRefusedError>(err: E): E => {
    err.replayed = replay;
    return err;
  };
  switch (state.kind) {
    case 'accepted': {
      const accepted = events.find((e) => e.type === 'TemplateSendAccepted')!;
      const at = accepted.type === 'TemplateSendAccepted' ? accepted.data.acceptedAt : state.request.requestedAt;
      // read-your-writes, as for a fresh send (a reconciled acceptance may not be projected yet)
      const last = stored[stored.length - 1];
      await services.runner.waitForEvents(last.position, [...new Set(stored.map((e) => e.type))]);
      const output: SendTemplateOutput = { sendId: state.request.sendId, providerMessageId: state.providerMessageId, sentAt: at };
      return { kind: 'answer', output: replay ? { ...output, replayed: true } : output };
    }
    case 'rejected': {
      const rejected = events.find((e) => e.type === 'TemplateSendRejected');
      if (rejected?.type !== 'TemplateSendRejected') return { kind: 'read-again' };
      const { code, message, retryable } = rejected.data;
      if (code === INTERRUPTED.code) throw replayed(interrupted());
      if (retryable) return { kind: 'next-attempt' };
      throw replayed(new SendRefusedError('PROVIDER_REFUSED', `The provider refused the message (${code}): ${message}`));
    }
    case 'requested': {
      // by this process's clock alone: one ahead of the writer's answers 503 below a little early, never a second call
      const leftMs = inFlightMs(services) - (services.now().getTime() - requestedAtOf(stored[0]));
      if (leftMs > 0) return { kind: 'in-flight', leftMs };
      const sendId = state.request.sendId;
      const resolve = (now: Date) =>
        sendDecider.decide(
          { type: 'ResolveUnansweredSend', data: { sendId, now: now.toISOString(), outcomeUnknownAfterMs: outcomeUnknownAfterMs(services) } },
          state,
        );
      let decided: SendEvent[];
      try {
        // recorded interrupted only when Postgres's clock agrees: a clock ahead of the writer's does not end a live send
        decided = resolve(clock.own());
        if (decided.length > 0) decided = resolve(await clock.both());
      } catch (err) {
        if (err instanceof DomainError && err.code === 'SEND_OUTCOME_UNKNOWN') {
          // the recipient stays held for the 24 h from the request (a reservation as long is normally there already:
          // the first answer's; this keeps it when that one was lost, e.g. its process died)
          await input.quotaHolds?.keepForOutcomeUnknown(state.request);
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

type Requested = Extract<SendEvent, { type: 'TemplateSendRequested' }>['data'];

/**
 * Whether the recorded request is this one: by fingerprint, or for a request recorded without one (by the version
 * before, so only within 24 h of an upgrade) by the fields the send was made of.
 */
function isSameRequest(recorded: Requested, input: SendTemplateInput, fingerprint: string): boolean {
  if (recorded.requestFingerprint !== undefined) return recorded.requestFingerprint === fingerprint;
  return recorded.phoneNumberId === input.phoneNumberId && recorded.templateName === input.templateName &&
    recorded.language === input.language && recorded.recipientPhone === input.recipientPhone &&
    canonicalJson(recorded.variables) === canonicalJson(input.variables) &&
    canonicalJson(recorded.buttonVariables) === canonicalJson(input.buttonVariables);
}

const interrupted = () =>
  new SendRefusedError('SEND_INTERRUPTED', `The first attempt with this Idempotency-Key was ${INTERRUPTED.message}: no status arrived from the provider.`);

export const outcomeUnknownAfterMs = (services: Services): number =>
  services.config.sends?.outcomeUnknownAfterMs ?? DEFAULT_OUTCOME_UNKNOWN_AFTER_MS;
