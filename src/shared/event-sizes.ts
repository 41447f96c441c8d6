import type { RecordedEvent } from '../ports/event-store';

/**
 * The exact size (characters of JSON) of the events whose store read their data as text (the Postgres adapter).
 * The log's readers size their reads by it (src/projections/read-sizes.ts); without it they estimate, and the estimate
 * measures an array of more than 3 items by 3 of them, so a bulk chunk whose large recipient was none of those was
 * taken for a few hundred bytes and reads brought many times their budget (regression review 22).
 */
const knownSizes = new WeakMap<RecordedEvent, number>();

/** Records `e`'s data as `chars` characters of JSON (the text it was parsed from). */
export function knownEventSize<E extends RecordedEvent>(e: E, chars: number): E {
  knownSizes.set(e, chars);
  return e;
}

/** `e`'s data size in characters of JSON, when its store said (knownEventSize). */
export const knownEventSizeOf = (e: RecordedEvent): number | undefined => knownSizes.get(e);
