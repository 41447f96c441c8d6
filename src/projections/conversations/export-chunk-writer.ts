// NDJSON bytes written straight into fixed-size Buffer chunks (ChunkWriter), and Postgres UTC timestamps
// written into them as ISO 8601.

/** NDJSON is handed on in chunks of this many bytes (longer rows get a chunk of their own). */
export const CHUNK_BYTES = 64 * 1024;

/**
 * NDJSON straight into Buffers: each line is written piece by piece into the current chunk (no per-line
 * string, no string-to-Buffer conversion of whole chunks), and a full chunk is handed on. Less garbage per row
 * is what keeps the heap, and so the RSS, flat while millions of rows pass.
 */
export class ChunkWriter {
  private buf = Buffer.allocUnsafe(CHUNK_BYTES);
  pos = 0;

  constructor(private readonly emit: (chunk: Buffer) => void) {}

  get buffer(): Buffer {
    return this.buf;
  }

  /** room for at least n more bytes in the current chunk */
  reserve(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    this.flush();
    if (n > this.buf.length) this.buf = Buffer.allocUnsafe(n);
  }

  /** ASCII only (ids, enum values, digits); short strings by hand: cheaper than a call into Buffer#write */
  ascii(s: string): void {
    const n = s.length;
    if (n > 64) {
      this.pos += this.buf.write(s, this.pos, 'latin1');
      return;
    }
    const b = this.buf;
    let p = this.pos;
    for (let i = 0; i < n; i++) b[p++] = s.charCodeAt(i);
    this.pos = p;
  }

  /** pre-encoded bytes (the constant parts of a line) */
  bytes(a: Uint8Array): void {
    this.buf.set(a, this.pos);
    this.pos += a.length;
  }

  utf8(s: string): void {
    this.pos += this.buf.write(s, this.pos, 'utf8');
  }

  /** bytes in the current chunk */
  get length(): number {
    return this.pos;
  }

  flush(): void {
    if (this.pos === 0) return;
    const chunk = this.buf.subarray(0, this.pos);
    this.buf = Buffer.allocUnsafe(CHUNK_BYTES);
    this.pos = 0;
    this.emit(chunk);
  }
}

/** Postgres UTC text (`2024-01-01 10:00:00[.ffffff]+00`) written as ISO 8601 with milliseconds. */
export function writeIso(w: ChunkWriter, s: string): void {
  const b = w.buffer;
  let p = w.pos;
  for (let i = 0; i < 19; i++) b[p + i] = s.charCodeAt(i);
  b[p + 10] = 0x54; // T
  p += 19;
  b[p++] = 0x2e; // .
  const fracEnd = s.length - 3; // before "+00"
  for (let i = 0; i < 3; i++) {
    const at = 20 + i;
    b[p++] = s.charCodeAt(19) === 0x2e && at < fracEnd ? s.charCodeAt(at) : 0x30;
  }
  b[p++] = 0x5a; // Z
  w.pos = p;
}

/** Postgres UTC text (`2024-01-01 10:00:00.123456+00`) → ISO 8601 with milliseconds (`2024-01-01T10:00:00.123Z`). */
export function isoFromPg(s: string): string {
  const w = new ChunkWriter(() => undefined);
  writeIso(w, s);
  return w.buffer.toString('latin1', 0, w.pos);
}
