import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { canonicalJson, canonicalJsonInTurns, canonicalJsonIterative } from '../../src/shared/canonical-json';
import { requestFingerprint, requestFingerprintInTurns } from '../../src/http/idempotency';
import { Turns } from '../../src/shared/turns';

// canonicalJson is part of every stored Idempotency-Key fingerprint: a keyed request repeated after an upgrade must
// give the same fingerprint, so the text must stay byte for byte what the first version wrote. The first version is
// kept verbatim in review15-canonical-json-walk.test.ts; the golden texts and hashes below were computed with it.

const sha = (text: string) => createHash('sha256').update(text).digest('hex');

/** a Turns that ends the slice after every item: the turn-yielding code yields as often as it can */
class EveryItem extends Turns {
  override due(): boolean {
    return true;
  }
}

const SEND_BODY = {
  recipient_phone: '+5491155551234', template_name: 'order_update', language: 'es_AR',
  variables: { name: 'Ana', order: 'A-1' }, button_variables: { button_0: 'x' },
};

const GOLDEN: Array<[unknown, string, string]> = [
  [SEND_BODY,
    '{"button_variables":{"button_0":"x"},"language":"es_AR","recipient_phone":"+5491155551234","template_name":"order_update","variables":{"name":"Ana","order":"A-1"}}',
    '3b15a7efd119055495de62dea9c0b7d43248bb122c9edd8e3af8e4241096bc86'],
  [{ b: 1, a: [1, 'two', null, undefined, { z: undefined, y: -0, x: 1e21, w: 0.1 + 0.2 }], 'ü': 'ñ\u2028\ud83d\ude00', '': true, 'Z': false },
    '{"":true,"Z":false,"a":[1,"two",null,null,{"w":0.30000000000000004,"x":1e+21,"y":0}],"b":1,"ü":"ñ\u2028\ud83d\ude00"}',
    '480ee4b25ef27a88122f12d8a2d7f9e97bd134531f052dd711b4a00a343e28a7'],
  [[[[[{ 'k"q': 'line\nbreak\t"q"\\' }]]]],
    '[[[[{"k\\"q":"line\\nbreak\\t\\"q\\"\\\\"}]]]]',
    '830ad2c9b319f22bb0a7e9c8b8897050775935f4f6d8e9a11b1c09e0fae9efa5'],
  [{ '10': 1, '2': 2, 'a': { '\ud83d\ude00': 1, 'é': 2, 'e': 3, 'E': 4, 'lone': '\ud800' } },
    '{"10":1,"2":2,"a":{"E":4,"e":3,"lone":"\\ud800","é":2,"\ud83d\ude00":1}}',
    'eb1b3e68292948514fe1a7141e33db9ca03ba17082f1a566665f3551cc5aeed9'],
];

/** a bulk body of n recipients, some with undefined variables (left out), unicode and varied key order */
const bulkBody = (n: number) => ({
  phone_number_id: 'p', template_name: 't',
  recipients: Array.from({ length: n }, (_, i) => ({
    phone: `+54911${10000000 + i}`,
    variables: { name: `Cliente ${i}`, 'ü': i % 7 === 0 ? undefined : `ñ${i}` },
    button_variables: { button_0: `A${i}` },
  })),
});

async function inTurns(value: unknown, turns: Turns = new EveryItem()): Promise<{ text: string; pieces: number }> {
  const pieces: string[] = [];
  await canonicalJsonInTurns(value, (t) => pieces.push(t), turns);
  return { text: pieces.join(''), pieces: pieces.length };
}

/** JSON-like values with undefined, -0, huge and tiny numbers, unicode (lone surrogates included) and any key */
const jsonish = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.constantFrom(null, undefined, true, false, 0, -0, 1e21, 5e-324, Number.MAX_SAFE_INTEGER, NaN, Infinity, '\ud800', 'a\udc00b', '\u0000'),
    fc.double(), fc.integer(), fc.string({ unit: 'binary' }), fc.string({ unit: 'grapheme' }),
    fc.array(tie('value'), { maxLength: 5 }),
    fc.dictionary(fc.string({ unit: 'binary', maxLength: 6 }), tie('value'), { maxKeys: 6 }),
  ),
})).value;

describe('canonicalJson: the same text as the first version', () => {
  it.each(GOLDEN.map((g, i) => [i, ...g] as const))('golden input %i: the text and its SHA-256 of before the change', async (_i, value, text, hash) => {
    expect(canonicalJsonIterative(value)).toBe(text);
    expect(canonicalJson(value)).toBe(text);
    expect(sha(canonicalJson(value))).toBe(hash);
    expect((await inTurns(value)).text).toBe(text);
  });

  it('random JSON-like values (key orders, unicode, nesting, undefined, numbers): fast, iterative and in turns agree', async () => {
    await fc.assert(fc.asyncProperty(jsonish, async (value) => {
      const reference = canonicalJsonIterative(value);
      expect(canonicalJson(value)).toBe(reference);
      expect((await inTurns(value)).text).toBe(reference);
    }), { numRuns: 2000 });
  });

  it('key order does not matter; undefined entries are left out; array holes and undefined items are null', () => {
    const a = { x: 1, y: { b: [1, undefined, , 3], a: 'é' }, u: undefined }; // a hole at index 2
    const b = { y: { a: 'é', b: [1, null, null, 3] }, x: 1 };
    expect(canonicalJson(a)).toBe(canonicalJson(b));
    expect(canonicalJson(a)).toBe(canonicalJsonIterative(a));
    expect(canonicalJson(a)).toBe('{"x":1,"y":{"a":"é","b":[1,null,null,3]}}');
  });

  it('nesting thousands of levels deep: text, as before (no stack overflow), the same as the first version', async () => {
    for (const depth of [199, 200, 201, 5000]) {
      const deep = JSON.parse('['.repeat(depth) + '{"a":[1,{"c":2,"b":3}]}' + ']'.repeat(depth));
      expect(canonicalJson(deep)).toBe(canonicalJsonIterative(deep));
      expect((await inTurns(deep, new Turns())).text).toBe(canonicalJsonIterative(deep));
    }
    const objects = JSON.parse('{"k":'.repeat(20000) + '1' + '}'.repeat(20000));
    expect(canonicalJson(objects)).toBe(canonicalJsonIterative(objects));
  });

  it('a bulk body of 5,000 recipients: the same text in turns, handed over in several pieces, with turns given', async () => {
    const body = bulkBody(5000);
    const turns = new Turns();
    const { text, pieces } = await inTurns(body, turns);
    expect(text).toBe(canonicalJsonIterative(body));
    expect(canonicalJson(body)).toBe(text);
    expect(pieces).toBeGreaterThan(1);
    expect(turns.yields).toBeGreaterThan(0);
  });
});

describe('request fingerprints: unchanged, and the same in turns', () => {
  it('a keyed single send: the fingerprint of before the change', () => {
    expect(requestFingerprint('POST', '/api/v1/platform-templates/send/', {}, SEND_BODY)).toBe('1fcfbb18794fa1775bb97d72688ef31fc440b49ac7f4e7bc80ed35dfd414f972');
  });

  it('a bulk body: requestFingerprintInTurns gives the fingerprint of before the change', async () => {
    const expected = '877d098fe19e0b4f25e88a83b2790b8d3833b9cb4f461ee6652938255d6a1da6';
    const body = bulkBody(5000);
    expect(requestFingerprint('POST', '/api/v1/platform-templates/send-bulk/', { id: 'x' }, body)).toBe(expected);
    const turns = new Turns();
    expect(await requestFingerprintInTurns('POST', '/api/v1/platform-templates/send-bulk/', { id: 'x' }, body, turns)).toBe(expected);
    expect(turns.yields).toBeGreaterThan(0);
  });

  it('random bodies: requestFingerprintInTurns equals requestFingerprint', async () => {
    await fc.assert(fc.asyncProperty(jsonish, async (body) => {
      const sync = requestFingerprint('PUT', '/r/:id', { id: 'é' }, body);
      expect(await requestFingerprintInTurns('PUT', '/r/:id', { id: 'é' }, body, new EveryItem())).toBe(sync);
    }), { numRuns: 500 });
  });

  it('a setImmediate queued before a large fingerprint runs before it ends (it gives the event loop turns)', async () => {
    const order: string[] = [];
    setImmediate(() => order.push('immediate'));
    await requestFingerprintInTurns('POST', '/x', {}, bulkBody(5000)).then(() => order.push('fingerprint'));
    expect(order).toEqual(['immediate', 'fingerprint']);
  });
});
