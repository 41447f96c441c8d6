// What an EventStoreDB append answered, for the adapter (esdb.ts), without the client's connection.
// Review 16d (2026-11-28): see docs/core.md, "EventStoreDB adapter: reviewed by reading".

/** The fields of the client's append answer the adapter reads. */
export interface EsdbAppendAnswer {
  success: boolean;
  nextExpectedRevision: bigint;
}

/** An append the server refused for its expected revision, answered as `success: false` rather than thrown. */
export class AppendRefusedError extends Error {
  override name = 'AppendRefusedError';
  constructor(readonly streamName: string) {
    super(`append to ${streamName} refused: wrong expected revision`);
  }
}

/**
 * Throws AppendRefusedError when the append was refused. With `throwOnAppendFailure=false` in
 * the connection string (a setting EVENTSTORE_URL may carry) the client answers a wrong expected version with
 * `success: false` instead of throwing, and the adapter took that answer for a write: the events were lost and the
 * caller told they were stored. Its revision is not the stream's (client 6.2.1 answers `BigInt(true)` there), so
 * the error carries none: the adapter reads the stream's revision for the port's error.
 */
export function assertAppended(streamName: string, answer: EsdbAppendAnswer): void {
  if (answer.success === false) throw new AppendRefusedError(streamName);
}

/** The stream's revision as the port's WrongExpectedRevisionError says it: a negative one (no stream) is `no_stream`. */
export function portActualRevision(actual: unknown): bigint | 'no_stream' {
  if (typeof actual === 'bigint') return actual < 0n ? 'no_stream' : actual;
  if (typeof actual === 'number' && Number.isInteger(actual)) return actual < 0 ? 'no_stream' : BigInt(actual);
  return 'no_stream';
}
