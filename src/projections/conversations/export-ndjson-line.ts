// One exported message as an NDJSON line: the record's shape (constant parts pre-encoded), its anonymized ids
// and its per-company metadata, written around the two fragments Postgres assembled.
import { Anonymizers } from '../../shared/anonymize';
import { type ChunkWriter, writeIso } from './export-chunk-writer';
import { C, type Row } from './export-query';

export const SCHEMA_VERSION = '1.0';

/** Bytes a row can take at most, besides its two Postgres-assembled fragments (UTF-8: ≤ 3 bytes per unit). */
const ROW_FIXED_BYTES = 1024;

const enc = (s: string): Uint8Array => Buffer.from(s, 'latin1');
const L = {
  messageId: enc('{"message_id":"'),
  conversationId: enc('","conversation_id":"'),
  occurredAt: enc('","occurred_at":"'),
  channel: enc('","channel":"'),
  direction: enc('","direction":"'),
  authorType: enc('","author":{"type":"'),
  authorId: enc('","id":'),
  nullComma: enc('null,'),
  quote: enc('"'),
  quoteComma: enc('",'),
  replyTo: enc(',"context":{"reply_to_message_id":'),
  null: enc('null'),
  threadPosition: enc(',"thread_position":null}'),
  end: enc('}\n'),
};

/**
 * How the text of a template the service sent begins in a row's `middle` (src/events/template-messages.ts records it
 * as `[template <name> (<language>)] <variable>=<value>, …`; Postgres writes `content` after `agent`, and a `system`
 * row has neither a display name nor an agent: this is its content).
 */
const SENT_TEMPLATE = '"content":{"type":"notification_template","text":"';
const SENT_TEMPLATE_TEXT = '[template ';

/**
 * A sent template's text as the export shows it: `[template <name> (<language>)]`, without the variables' values
 * (a customer's name, amounts, dates, links: personal data the export does not need; docs/privacy.md, "Export").
 * The text is cut after its first `)]`, so no part of a value stays whatever a name or a value holds; the cut
 * falls between two characters of the JSON string (neither `)` nor `]` is part of an escape). Any other row, or a
 * text not in that form, is returned as it is.
 */
export function withoutTemplateValues(middle: string): string {
  const at = middle.indexOf(SENT_TEMPLATE);
  if (at < 0) return middle;
  const text = at + SENT_TEMPLATE.length;
  if (!middle.startsWith(SENT_TEMPLATE_TEXT, text)) return middle;
  const end = closingQuote(middle, text);
  const header = middle.indexOf(')]', text);
  if (header < 0 || header >= end) return middle;
  return middle.slice(0, header + 2) + middle.slice(end);
}

/** The position of the quote that closes the JSON string whose text starts at `from`. */
function closingQuote(json: string, from: number): number {
  for (let i = from; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (c === 92) i++; // a backslash and the character it escapes
    else if (c === 34) return i;
  }
  return json.length;
}

export class LineFormatter {
  private readonly anon: Anonymizers;
  /** per company: `,"metadata":{…}` for the current batch's exported_at */
  private readonly metadata = new Map<string, Uint8Array>();
  private exportedAt = '';

  constructor(secret: string) {
    this.anon = new Anonymizers(secret);
  }

  write(w: ChunkWriter, r: Row, exportedAt: string): void {
    const companyId = r[C.companyId]!;
    const a = this.anon.of(Number(companyId));
    if (exportedAt !== this.exportedAt) {
      this.exportedAt = exportedAt;
      this.metadata.clear();
    }
    let metadata = this.metadata.get(companyId);
    if (metadata === undefined) {
      metadata = enc(`,"metadata":{"client_id":"${a.clientId}","company_id":${companyId},"exported_at":"${exportedAt}","schema_version":"${SCHEMA_VERSION}"}`);
      this.metadata.set(companyId, metadata);
    }
    const authorType = r[C.authorType]!;
    // only the service writes a sent template's text, as `system`
    const middle = authorType === 'system' ? withoutTemplateValues(r[C.middle]!) : r[C.middle]!;
    const optional = r[C.optional]!;
    w.reserve(ROW_FIXED_BYTES + 3 * (middle.length + optional.length));

    w.bytes(L.messageId);
    w.pos = a.writeMessage(r[C.messageId]!, w.buffer, w.pos);
    w.bytes(L.conversationId);
    w.ascii(a.id('conversation', r[C.conversationId]!));
    w.bytes(L.occurredAt);
    writeIso(w, r[C.occurredAt]!);
    w.bytes(L.channel);
    w.ascii(r[C.channel]!);
    w.bytes(L.direction);
    w.ascii(r[C.direction]!);
    w.bytes(L.authorType);
    w.ascii(authorType);
    w.bytes(L.authorId);
    const ref = r[C.authorRef];
    // a contact the platform did not identify is pseudonymized by its phone, when known
    const kind = ref === null ? null : authorType === 'contact' ? 'contact' : authorType === 'agent' ? 'agent' : authorType === 'human_operator' ? 'operator' : null;
    if (kind === null) w.bytes(L.nullComma);
    else {
      w.bytes(L.quote);
      w.ascii(a.id(kind, ref!));
      w.bytes(L.quoteComma);
    }
    w.utf8(middle);
    w.bytes(L.replyTo);
    const replyTo = r[C.replyTo];
    if (replyTo === null) w.bytes(L.null);
    else {
      w.bytes(L.quote);
      w.pos = a.writeMessage(replyTo, w.buffer, w.pos);
      w.bytes(L.quote);
    }
    w.bytes(L.threadPosition);
    w.bytes(metadata);
    w.utf8(optional);
    w.bytes(L.end);
  }
}
