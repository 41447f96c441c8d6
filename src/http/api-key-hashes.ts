import { hashApiKey } from '../shared/api-key';
import { Lru } from '../shared/lru';

/**
 * The hashes of the API keys that authenticated lately, so that a known key's request skips the HMAC (about a fifth
 * of an authenticated read's CPU, docs/benchmarks.md). Only keys that matched a stored key are kept, so made-up
 * keys cannot fill it; at most `maxEntries`, the least recently used dropped first. The clear keys stay in this
 * process's memory, as they are in every request's headers; they are never written anywhere.
 */
export class ApiKeyHashes {
  private readonly known: Lru<string, string>;

  constructor(
    private readonly pepper: string,
    maxEntries = 10_000,
  ) {
    this.known = new Lru(maxEntries);
  }

  /** `find`'s answer for the hash of `clear`: the hash from memory when `clear` matched before, else the HMAC. */
  async find<T>(clear: string, find: (hash: string) => Promise<T | undefined>): Promise<T | undefined> {
    const known = this.known.get(clear);
    if (known !== undefined) return find(known);
    const hash = hashApiKey(this.pepper, clear);
    const found = await find(hash);
    if (found !== undefined) this.known.set(clear, hash);
    return found;
  }
}
