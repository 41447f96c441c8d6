import { createHmac } from 'node:crypto';

// Anonymization of the export (ARCHITECTURE section 10, docs/export.md):
//   companyKey = HMAC-SHA256(ANONYMIZATION_SECRET, "<company_id>")
//   id         = prefix + first 24 hex chars of HMAC-SHA256(companyKey, "<kind>:<real id>")
// Deterministic per company (the same in every export, process and restart with the same secret), different
// between companies for the same real id, irreversible without the secret.

export const ANON_PREFIX = {
  message: 'msg_',
  conversation: 'conv_',
  contact: 'ctc_',
  agent: 'agt_',
  operator: 'op_',
  company: 'cmp_',
} as const;

export type AnonKind = keyof typeof ANON_PREFIX;

const HEX_CHARS = 24;

export function companyKey(secret: string, companyId: number): Buffer {
  return createHmac('sha256', secret).update(String(companyId)).digest();
}

/** One anonymized id, computed from scratch with node:crypto (tests, one-off uses). */
export function anonymizeId(secret: string, companyId: number, kind: AnonKind, realId: string | number): string {
  return ANON_PREFIX[kind] + createHmac('sha256', companyKey(secret, companyId)).update(`${kind}:${realId}`).digest('hex').slice(0, HEX_CHARS);
}

// ---------------------------------------------------------------------------------------------------------
// HMAC-SHA256 with precomputed midstates. The export computes about one HMAC per row with the same key, and
// `createHmac` spends most of its time per call on setup, not on hashing: here the key's two pad blocks
// (K ⊕ ipad, K ⊕ opad) are compressed once, and each HMAC of a short input costs two or three SHA-256
// compressions in plain JS. Standard SHA-256 (FIPS 180-4) and HMAC (RFC 2104); the tests compare it with
// node:crypto on random inputs. Inputs longer than the scratch buffer go to `createHmac`.

const K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01,
  0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc,
  0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
  0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08,
  0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
  0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
const IV = new Int32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
const W = new Int32Array(64);
const HEX: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));
const HEX_CODES = Uint8Array.from('0123456789abcdef', (c) => c.charCodeAt(0));

/** One SHA-256 compression of the 64-byte block at `off` into the state `H` (in place). */
function compress(H: Int32Array, b: Uint8Array, off: number): void {
  for (let i = 0; i < 16; i++) {
    const j = off + i * 4;
    W[i] = (b[j] << 24) | (b[j + 1] << 16) | (b[j + 2] << 8) | b[j + 3];
  }
  for (let i = 16; i < 64; i++) {
    const x = W[i - 15];
    const y = W[i - 2];
    const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
    const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
    W[i] = (W[i - 16] + s0 + W[i - 7] + s1) | 0;
  }
  let a = H[0], bb = H[1], c = H[2], d = H[3], e = H[4], f = H[5], g = H[6], h = H[7];
  for (let i = 0; i < 64; i++) {
    const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const t1 = (h + S1 + ((e & f) ^ (~e & g)) + K[i] + W[i]) | 0;
    const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const t2 = (S0 + ((a & bb) ^ (a & c) ^ (bb & c))) | 0;
    h = g; g = f; f = e; e = (d + t1) | 0; d = c; c = bb; bb = a; a = (t1 + t2) | 0;
  }
  H[0] = (H[0] + a) | 0; H[1] = (H[1] + bb) | 0; H[2] = (H[2] + c) | 0; H[3] = (H[3] + d) | 0;
  H[4] = (H[4] + e) | 0; H[5] = (H[5] + f) | 0; H[6] = (H[6] + g) | 0; H[7] = (H[7] + h) | 0;
}

const SCRATCH_BYTES = 2048;
/** UTF-8 takes at most 3 bytes per UTF-16 unit; 9 bytes of padding; longer inputs use createHmac */
const MAX_FAST_CHARS = Math.floor((SCRATCH_BYTES - 9) / 3);

/** HMAC-SHA256 under one fixed key (at most 64 bytes), returning the first 24 hex chars of the MAC. */
export class HmacPrefix {
  private readonly innerMid = new Int32Array(8);
  private readonly outerMid = new Int32Array(8);
  private readonly state = new Int32Array(8);
  private readonly scratch = Buffer.alloc(SCRATCH_BYTES);
  private readonly outerBlock = new Uint8Array(64);

  constructor(private readonly key: Buffer) {
    if (key.length > 64) throw new Error('HmacPrefix keys are at most 64 bytes');
    const ipad = new Uint8Array(64).fill(0x36);
    const opad = new Uint8Array(64).fill(0x5c);
    for (let i = 0; i < key.length; i++) {
      ipad[i] ^= key[i];
      opad[i] ^= key[i];
    }
    this.innerMid.set(IV);
    compress(this.innerMid, ipad, 0);
    this.outerMid.set(IV);
    compress(this.outerMid, opad, 0);
    // the outer block: the 32-byte inner digest, then padding for a 96-byte message (768 bits)
    this.outerBlock[32] = 0x80;
    this.outerBlock[62] = 0x03;
    this.outerBlock[63] = 0x00;
  }

  hex24(message: string): string {
    if (message.length > MAX_FAST_CHARS) return createHmac('sha256', this.key).update(message).digest('hex').slice(0, HEX_CHARS);
    this.run(this.scratch.write(message, 0, 'utf8'));
    const H = this.state;
    let s = '';
    for (let i = 0; i < 3; i++) {
      const v = H[i];
      s += HEX[v >>> 24] + HEX[(v >>> 16) & 0xff] + HEX[(v >>> 8) & 0xff] + HEX[v & 0xff];
    }
    return s;
  }

  /** hex24 of `prefix + message`, written as 24 ASCII bytes into `out` at `pos`; returns the position after. */
  writeHex24(prefix: string, message: string, out: Buffer, pos: number): number {
    if (prefix.length + message.length > MAX_FAST_CHARS) return pos + out.write(this.hex24(prefix + message), pos, 'latin1');
    const b = this.scratch;
    const n = prefix.length;
    for (let i = 0; i < n; i++) b[i] = prefix.charCodeAt(i); // ASCII prefix
    this.run(n + b.write(message, n, 'utf8'));
    const H = this.state;
    for (let i = 0; i < 3; i++) {
      const v = H[i];
      out[pos++] = HEX_CODES[v >>> 28]; out[pos++] = HEX_CODES[(v >>> 24) & 15];
      out[pos++] = HEX_CODES[(v >>> 20) & 15]; out[pos++] = HEX_CODES[(v >>> 16) & 15];
      out[pos++] = HEX_CODES[(v >>> 12) & 15]; out[pos++] = HEX_CODES[(v >>> 8) & 15];
      out[pos++] = HEX_CODES[(v >>> 4) & 15]; out[pos++] = HEX_CODES[v & 15];
    }
    return pos;
  }

  /** HMAC of the n message bytes in the scratch buffer into `state`. */
  private run(n: number): void {
    const b = this.scratch;
    let len = n;
    b[len++] = 0x80;
    while (len % 64 !== 56) b[len++] = 0;
    const bits = (64 + n) * 8; // the ipad block is already in the midstate
    b[len++] = 0; b[len++] = 0; b[len++] = 0; b[len++] = 0;
    b[len++] = bits >>> 24; b[len++] = (bits >>> 16) & 0xff; b[len++] = (bits >>> 8) & 0xff; b[len++] = bits & 0xff;
    const H = this.state;
    H.set(this.innerMid);
    for (let off = 0; off < len; off += 64) compress(H, b, off);
    const o = this.outerBlock;
    for (let i = 0; i < 8; i++) {
      const v = H[i];
      o[i * 4] = v >>> 24; o[i * 4 + 1] = (v >>> 16) & 0xff; o[i * 4 + 2] = (v >>> 8) & 0xff; o[i * 4 + 3] = v & 0xff;
    }
    H.set(this.outerMid);
    compress(H, o, 0);
  }
}

// ---------------------------------------------------------------------------------------------------------

/** Cache bound for the repeated kinds (conversations, contacts, agents, operators) of one company. */
const MAX_CACHED = 20_000;

type CachedKind = Exclude<AnonKind, 'message' | 'company'>;

/**
 * The anonymizer of one company: its company key (as midstates), and a bounded cache of the ids that repeat
 * across rows (conversation, contact, agent, operator). Message ids are unique per row: computed each time.
 */
export class CompanyAnonymizer {
  readonly clientId: string;
  private readonly mac: HmacPrefix;
  private readonly caches: Record<CachedKind, Map<string, string>> = {
    conversation: new Map(), contact: new Map(), agent: new Map(), operator: new Map(),
  };

  constructor(secret: string, readonly companyId: number) {
    this.mac = new HmacPrefix(companyKey(secret, companyId));
    this.clientId = ANON_PREFIX.company + this.mac.hex24(`company:${companyId}`);
  }

  /** `msg_…` */
  message(id: string): string {
    return ANON_PREFIX.message + this.mac.hex24('message:' + id);
  }

  /** `msg_…` written as ASCII into `out` at `pos` (no string made); returns the position after it. */
  writeMessage(id: string, out: Buffer, pos: number): number {
    out[pos] = 0x6d; out[pos + 1] = 0x73; out[pos + 2] = 0x67; out[pos + 3] = 0x5f; // msg_
    return this.mac.writeHex24('message:', id, out, pos + 4);
  }

  /** conversation / contact / agent / operator ids (cached, bounded). */
  id(kind: CachedKind, realId: string): string {
    const cache = this.caches[kind];
    let v = cache.get(realId);
    if (v === undefined) {
      if (cache.size >= MAX_CACHED) cache.clear();
      v = ANON_PREFIX[kind] + this.mac.hex24(kind + ':' + realId);
      cache.set(realId, v);
    }
    return v;
  }
}

/** Anonymizers per company for one export (a company's ids are the same alone or with others). */
export class Anonymizers {
  private readonly byCompany = new Map<number, CompanyAnonymizer>();

  constructor(private readonly secret: string) {}

  of(companyId: number): CompanyAnonymizer {
    let a = this.byCompany.get(companyId);
    if (!a) {
      a = new CompanyAnonymizer(this.secret, companyId);
      this.byCompany.set(companyId, a);
    }
    return a;
  }
}
