// What the logs may hold (docs/reliability.md, "What is logged (2026-11-28)"): the options every pino logger of the
// process is built with, the process's own (src/main.ts: workers, runner, start-up) and the HTTP listeners' (the
// API app and a worker's ops listener), so all three redact and serialize alike.
import { createHash } from 'node:crypto';
import { isPossiblePhoneNumber } from 'libphonenumber-js/max';
import pino, { type DestinationStream, type LoggerOptions } from 'pino';

/** Request headers that carry a credential or a signature: never written to a log, wherever a header set is logged. */
export const SECRET_HEADERS = [
  'x-api-key',
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'webhook-signature',
  'x-hub-signature-256',
  'x-hub-signature',
] as const;

/** Where a header set is found in a log line: `{ headers }`, `{ req: { headers } }`, `{ res: { headers } }`. */
export const REDACT_PATHS: string[] = SECRET_HEADERS.flatMap((h) => [`headers["${h}"]`, `req.headers["${h}"]`, `res.headers["${h}"]`]);

/**
 * Fields of a Postgres error (pg's DatabaseError) that can hold row values: `detail` ("Key (phone)=(+49…) already
 * exists", "Failing row contains (…)": phone numbers, contact fields, message bodies), `where` and `internalQuery`
 * (a PL/pgSQL context or statement, with its values). The message, code, table, column and constraint stay.
 */
const ROW_VALUE_FIELDS = ['detail', 'where', 'internalQuery'] as const;
export const REDACTED = '[redacted]';

/** pino's error serializer, without the Postgres fields above (in the error and in the errors it holds). */
export function serializeError(err: unknown): unknown {
  const out = pino.stdSerializers.err(err as Error) as unknown;
  if (out === err || out === null || typeof out !== 'object') return out;
  const serializedProto = Object.getPrototypeOf(out);
  const scrub = (e: Record<string, unknown>, depth: number) => {
    for (const field of ROW_VALUE_FIELDS) if (e[field] !== undefined && e[field] !== null) e[field] = REDACTED;
    if (depth > 8) return;
    for (const value of Object.values(e)) {
      if (Array.isArray(value)) {
        for (const v of value) if (v && typeof v === 'object' && Object.getPrototypeOf(v) === serializedProto) scrub(v as Record<string, unknown>, depth + 1);
      } else if (value && typeof value === 'object' && Object.getPrototypeOf(value) === serializedProto) {
        scrub(value as Record<string, unknown>, depth + 1);
      }
    }
  };
  scrub(out as Record<string, unknown>, 0);
  return out;
}

interface RequestLike {
  method?: string;
  url?: string;
  host?: string;
  ip?: string;
  headers?: Record<string, unknown>;
  socket?: { remoteAddress?: string; remotePort?: number };
}

/**
 * A request as an access log line shows it: fastify's fields, but the URL without its query string, which can hold
 * a phone number (`/api/v1/contact-lookup/?phone=…`) or the provider's verify token (`hub.verify_token=…`).
 */
export function serializeRequest(req: RequestLike): Record<string, unknown> {
  const url = typeof req.url === 'string' ? req.url : undefined;
  const at = url?.indexOf('?') ?? -1;
  return {
    method: req.method,
    url: url === undefined || at < 0 ? url : `${url.slice(0, at)}?${REDACTED}`,
    host: req.host ?? req.headers?.host,
    remoteAddress: req.ip ?? req.socket?.remoteAddress,
    remotePort: req.socket?.remotePort,
  };
}

/**
 * A provider message id: `wamid.` and base64 of a structure that starts with the customer's number (the provider's
 * ids, `wamid.HBgLMTY1MDUwNzY1MjAV…` is `…16505076520…`, and the sandbox's alike). In a log line it is replaced by
 * `logRef(id)`, so the number is not there and the line can still be found from the id (docs/privacy.md).
 */
const PROVIDER_MESSAGE_ID = /wamid\.[A-Za-z0-9_\-+=/]+/g;
/**
 * What may be a phone number written with its `+`: digits, in groups separated by one space, dash or dot, or by a
 * parenthesized group (`+5491155550166`, `+49 151 2345 6789`, `+1-202-555-0123`, `+54 (9) 11 5555-0001`). Which
 * of them are masked: `maskPhone`. Linear: each repetition starts with a character no digit run can take.
 */
const PHONE_CANDIDATE = /\+[0-9]+(?:(?:[ .-]| ?\([0-9]{1,4}\) ?)[0-9]+)*/g;
/** Digits after a `+` masked without asking libphonenumber (E.164 has up to 15; a mistyped number more). */
const MIN_PHONE_DIGITS = 7;
const LEADING_DIGITS = /^\+[0-9]+/;
const NOT_DIGITS = /[^0-9]/g;
/** A candidate's last separator and group. */
const LAST_GROUP = /(?:[ .-]| ?\([0-9]{1,4}\) ?)[0-9]+$/;
/** The conversation of a customer's number with a business number, `msgapp-<phone_number_id>-<digits>` (no `+`). */
const NUMBER_CONVERSATION = /(msgapp-[0-9]+-)[0-9]{7,}/g;
export const PHONE_REDACTED = '+[phone]';

/** What a log line shows for a provider message id: `wamid.[sha256:<first 12 hex of SHA-256 of the id>]`. */
export function logRef(providerMessageId: string): string {
  return `wamid.[sha256:${createHash('sha256').update(providerMessageId).digest('hex').slice(0, 12)}]`;
}

/**
 * The last step of every log line (pino's `hooks.streamWrite`, on the serialized line): provider message ids, phone
 * numbers written with `+`, and customer numbers in conversation ids are taken out, wherever they are (a field, the
 * message, an error's message or stack, a dead-letter reason). None of the replacements adds a quote or a backslash,
 * so the line stays the same JSON.
 */
export function scrubLogLine(line: string): string {
  if (line.includes('wamid.')) line = line.replace(PROVIDER_MESSAGE_ID, logRef);
  if (line.includes('+')) {
    asksLeft = PHONE_ASKS_PER_LINE;
    line = line.replace(PHONE_CANDIDATE, maskPhone);
  }
  if (line.includes('msgapp-')) line = line.replace(NUMBER_CONVERSATION, `$1${PHONE_REDACTED.slice(1)}`);
  return line;
}

/**
 * A candidate of PHONE_CANDIDATE as the line shows it: `+[phone]`, or as it was when it is no number or part of a
 * longer word (`order+1234567`, `e+21`, base64 `ab+1234567Cd`: a letter or `_` before the `+`). Without
 * separators, 7 digits or more are a number (a mistyped one too); with separators, the candidate must be a possible
 * number for its country calling code (libphonenumber-js: `+1 2026-11-28` is not), else only its leading digits
 * are judged. A last group glued to a word (`+49 151 2345 6789 2nd`) is left out of the number. libphonenumber-js
 * is asked only for separated candidates of 7 to 20 digits, at most PHONE_ASKS_PER_LINE a line: rare, and some 15-90 µs
 * each (docs/privacy.md).
 */
function maskPhone(candidate: string, at: number, line: string): string {
  if (!startsWord(line, at)) return candidate;
  let end = candidate.length;
  // the candidate ends a word, or its last group is cut off until it does (a separator is never a word character)
  while (isWordChar(line.charCodeAt(at + end))) {
    const cut = candidate.slice(0, end).search(LAST_GROUP);
    if (cut < 0) return candidate;
    end = cut;
  }
  return judgePhone(candidate.slice(0, end)) + candidate.slice(end);
}

/**
 * How many separated candidates of a line libphonenumber-js judges (20-90 µs each); the line's further ones of 7
 * digits or more are masked without asking (regression review 23b: a crafted value of `+1 234 5678 ` repeated, 12 KB
 * in a request path or a field, cost 120 ms of the logger's thread per line, one call per candidate). Masking more
 * than needed is the safe side; no real line holds 8 separated numbers.
 */
const PHONE_ASKS_PER_LINE = 8;
/**
 * More digits than any possible number (a country calling code of up to 3 and libphonenumber's longest national
 * number, 17): not asked, its leading digits are judged (libphonenumber-js would say no, after parsing the whole
 * candidate: 0.75 ms for one of 5,000 groups of `1 `).
 */
const MAX_PHONE_DIGITS = 20;
let asksLeft = PHONE_ASKS_PER_LINE;

function judgePhone(candidate: string): string {
  const leading = LEADING_DIGITS.exec(candidate)![0];
  if (leading.length === candidate.length) return leading.length - 1 >= MIN_PHONE_DIGITS ? PHONE_REDACTED : candidate;
  const digits = candidate.replace(NOT_DIGITS, '').length;
  if (digits >= MIN_PHONE_DIGITS && digits <= MAX_PHONE_DIGITS && (asksLeft-- <= 0 || isPossiblePhoneNumber(candidate))) return PHONE_REDACTED;
  return leading.length - 1 >= MIN_PHONE_DIGITS ? PHONE_REDACTED + candidate.slice(leading.length) : candidate;
}

/** A letter, digit or `_` (NaN, past the line's end, is not). */
const isWordChar = (c: number): boolean => (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95;

/** An ASCII letter or `_`. */
const isLetter = (c: number): boolean => (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95;

/**
 * Whether the `+` at `at` may begin a number: the line's start, a character before it that is no letter or `_` (a
 * digit is allowed: `…301+549…` may be ids glued to a number), or a JSON escape (`\n+549…` is a new line of a
 * message or stack; `\u0001+549…` a control character).
 */
function startsWord(line: string, at: number): boolean {
  if (at === 0 || !isLetter(line.charCodeAt(at - 1))) return true;
  if (at >= 2 && line.charCodeAt(at - 2) === 92 && 'nrtbf'.includes(line[at - 1])) return true;
  return at >= 6 && line.charCodeAt(at - 6) === 92 && line[at - 5] === 'u';
}

const shared = (level: string): LoggerOptions => ({
  level,
  redact: { paths: REDACT_PATHS, censor: REDACTED },
  serializers: { err: serializeError, req: serializeRequest as never },
  hooks: { streamWrite: scrubLogLine },
});

/** The process's logger (serve, worker, the CLI's commands). */
export function createProcessLogger(level: string, output?: DestinationStream): pino.Logger {
  return output ? pino(shared(level), output) : pino(shared(level));
}

/** fastify's `logger` option for the API app and the ops listener, writing to `stream`. */
export function httpLoggerOptions(level: string, stream?: DestinationStream): LoggerOptions & { stream?: DestinationStream } {
  return { ...shared(level), ...(stream ? { stream } : {}) };
}
