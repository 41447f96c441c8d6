// Canonical JSON: what two requests are compared by (docs/idempotency.md, "Same key, same request").
import type { Turns } from './turns';

/** Levels written by recursion; a subtree deeper than this is written with an explicit stack (same text). */
const RECURSION_DEPTH = 200;

/**
 * JSON with object keys sorted at every depth: equal bodies give equal text whatever their key order. Object
 * entries whose value is undefined are left out; an undefined (or missing) array item is `null`; other values as
 * JSON.stringify writes them (toJSON is not called: a Date is `{}`). The text is part of every stored Idempotency-Key
 * fingerprint, so it must never change (test/unit/canonical-json-identical.test.ts pins the first version's texts and
 * compares it with canonicalJsonIterative below on varied inputs; test/unit/review15-canonical-json-walk.test.ts
 * keeps the first version verbatim and compares all three writers with it).
 *
 * Written by recursion that concatenates strings (cheaper than the stack of tiny strings joined at the end: see
 * docs/idempotency.md); a subtree nested deeper than RECURSION_DEPTH levels is written with the explicit stack, so a
 * body nested thousands of levels deep (well inside the 1 MiB limit) is text, not a stack overflow.
 */
export function canonicalJson(value: unknown): string {
  return write(value, 0);
}

/** Text JSON.stringify writes as is between quotes: no `"`, `\\`, control character or surrogate (any of those: JSON.stringify). */
const PLAIN = /^[^"\\\u0000-\u001f\ud800-\udfff]*$/;

/** JSON.stringify(text), without its cost for the common text that needs no escape (names, phones, ids) */
const quote = (text: string): string => (PLAIN.test(text) ? '"' + text + '"' : JSON.stringify(text));

function write(v: unknown, depth: number): string {
  if (typeof v === 'string') return quote(v);
  if (typeof v !== 'object' || v === null) return primitive(v);
  if (depth >= RECURSION_DEPTH) return canonicalJsonIterative(v);
  if (Array.isArray(v)) {
    const n = v.length;
    if (n === 0) return '[]';
    let out = '[' + write(v[0] ?? null, depth + 1);
    for (let i = 1; i < n; i++) out += ',' + write(v[i] ?? null, depth + 1);
    return out + ']';
  }
  const o = v as Record<string, unknown>;
  // default sort: UTF-16 code unit order, as the first version's comparator (keys are unique: no ties)
  const keys = Object.keys(o).sort();
  let out = '{';
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i];
    const e = o[k];
    if (e === undefined) continue;
    out += (out.length === 1 ? '' : ',') + quote(k) + ':' + write(e, depth + 1);
  }
  return out + '}';
}

/** a non-object value as the first version wrote it: JSON.stringify(v ?? null), nothing for a function or symbol */
function primitive(v: unknown): string {
  if (v === undefined || v === null) return 'null';
  if (v === true) return 'true';
  if (v === false) return 'false';
  const text = JSON.stringify(v);
  return text === undefined ? '' : text;
}

/**
 * The first version's walk (an explicit stack of values to write and text to emit as is: any depth), in runs that can
 * stop after any item and go on later. Object keys in UTF-16 code unit order (default sort: keys are unique, no ties),
 * undefined entries left out, undefined array items `null`, other values as write() writes them.
 */
class CanonicalWalk {
  /** text written and not yet taken */
  text = '';
  private readonly work: Array<{ value: unknown } | string>;

  constructor(value: unknown) {
    this.work = [{ value }];
  }

  /**
   * Writes items (the value, then each value of its arrays and objects) until `stop()`, asked after each item, says
   * so; true when everything is written.
   */
  run(stop: () => boolean): boolean {
    const work = this.work;
    while (work.length > 0) {
      const next = work.pop()!;
      if (typeof next === 'string') {
        this.text += next;
        continue;
      }
      const v = next.value;
      if (typeof v !== 'object' || v === null) {
        this.text += typeof v === 'string' ? quote(v) : primitive(v);
      } else if (Array.isArray(v)) {
        work.push(']');
        for (let i = v.length - 1; i >= 0; i--) {
          work.push({ value: v[i] ?? null });
          if (i > 0) work.push(',');
        }
        work.push('[');
      } else {
        const o = v as Record<string, unknown>;
        const keys = Object.keys(o).sort();
        work.push('}');
        let later = false; // an entry after this one (from the end) was written: a comma goes before it
        for (let i = keys.length - 1; i >= 0; i--) {
          const e = o[keys[i]];
          if (e === undefined) continue;
          if (later) work.push(',');
          work.push({ value: e }, quote(keys[i]) + ':');
          later = true;
        }
        work.push('{');
      }
      if (stop()) return work.length === 0;
    }
    return true;
  }
}

const never = (): boolean => false;

/**
 * canonicalJson by the explicit-stack walk (the first version's way, no recursion): the writer of subtrees nested
 * deeper than RECURSION_DEPTH, and the reference the recursive writer is compared with.
 */
export function canonicalJsonIterative(value: unknown): string {
  const walk = new CanonicalWalk(value);
  walk.run(never);
  return walk.text;
}

/** Text is handed to `emit` in pieces of about this many characters (whole tokens: never half a surrogate pair). */
const EMIT_CHARS = 64 * 1024;

/**
 * canonicalJson for a large value (a 10 MB send-bulk body), in slices that give the event loop a turn between them
 * (src/shared/turns.ts): the same text, handed to `emit` in pieces in order (to a hash, without building the whole
 * text). One item (a value of an array or an object) counts as one step of the slice.
 */
export async function canonicalJsonInTurns(value: unknown, emit: (text: string) => void, turns: Turns): Promise<void> {
  const walk = new CanonicalWalk(value);
  const stop = (): boolean => {
    if (walk.text.length >= EMIT_CHARS) {
      emit(walk.text);
      walk.text = '';
    }
    return turns.due();
  };
  while (!walk.run(stop)) await turns.next();
  if (walk.text.length > 0) emit(walk.text);
}
