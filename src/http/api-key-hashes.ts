import { hashApiKey } from '../shared/api-key';

/**
 * The hashes of the API keys that authenticated lately, so that a known key's request skips the HMAC (about a fifth
 * of an authenticated read's CPU, docs/benchmarks.md). Only keys that matched a record are kept, so made-up keys
 * cannot fill it; at most `maxEntries`, the oldest dropped first. The clear keys stay in this process's memory, as
 * they are in every request's headers; they are never written anywhere.
 */
export class ApiKeyHashes {
  private readonly hashes = new Map<string, string>();

  constructor(
    private readonly pepper: string,
    private readonly maxEntries = 10_000,
  ) {}

  hashOf(clear: string): string {
    return this.hashes.get(clear) ?? hashApiKey(this.pepper, clear);
  }

  /** `clear` hashed to `hash` and matched a stored key. */
  remember(clear: string, hash: string): void {
    if (this.hashes.has(clear)) return;
    if (this.hashes.size >= this.maxEntries) this.hashes.delete(this.hashes.keys().next().value as string);
    this.hashes.set(clear, hash);
  }
}
