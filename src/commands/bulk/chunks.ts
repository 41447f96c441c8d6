// How a bulk's recipients are cut into chunk streams (bulkchunk-{id}-{n}, one BulkRecipientsAdded event each).

/** Recipients per chunk at most. */
export const CHUNK_SIZE = 1000;

/**
 * Recipients' JSON per chunk at most, in bytes. EventStoreDB refuses a write over its `MaxAppendSize` (1 MiB by
 * default): 1,000 recipients with long variables passed it, and the bulk's creation failed there (review 16d).
 * A recipient larger than this goes alone in its chunk.
 */
export const CHUNK_MAX_BYTES = 256 * 1024;

/**
 * The first recipient of each chunk, for recipients of these sizes (bytes of their JSON), in order: a chunk ends at
 * CHUNK_SIZE recipients or before the recipient that would take it over CHUNK_MAX_BYTES.
 */
export function chunkStarts(sizes: readonly number[], maxCount = CHUNK_SIZE, maxBytes = CHUNK_MAX_BYTES): number[] {
  const starts: number[] = [];
  let count = 0;
  let bytes = 0;
  for (let i = 0; i < sizes.length; i++) {
    if (count === 0 || count >= maxCount || bytes + sizes[i] > maxBytes) {
      starts.push(i);
      count = 0;
      bytes = 0;
    }
    count++;
    bytes += sizes[i];
  }
  return starts;
}
