import type { EventStore, EventToAppend, ExpectedRevision, Position, ReadAllBatch, RecordedEvent, StreamAppend } from '../ports/event-store';
import type { EventRegistry } from './registry';

/** Wraps any adapter: every appended event is validated (and version-stamped); every read event is upcast. */
export class ValidatingEventStore implements EventStore {
  readonly kind: EventStore['kind'];
  readonly appendManyIsAtomic: boolean;

  constructor(
    private readonly inner: EventStore,
    private readonly registry: EventRegistry,
  ) {
    this.kind = inner.kind;
    this.appendManyIsAtomic = inner.appendManyIsAtomic;
  }

  append(streamId: string, events: EventToAppend[], expected: ExpectedRevision) {
    return this.inner.append(streamId, events.map((e) => this.registry.prepare(e)), expected);
  }

  appendMany(appends: StreamAppend[]) {
    return this.inner.appendMany(appends.map((a) => ({ ...a, events: a.events.map((e) => this.registry.prepare(e)) })));
  }

  async readStream(streamId: string, fromRevision?: bigint): Promise<RecordedEvent[]> {
    return (await this.inner.readStream(streamId, fromRevision)).map((e) => this.registry.upcast(e));
  }

  async readStreams(streamIds: readonly string[]): Promise<Map<string, RecordedEvent[]>> {
    const streams = await this.inner.readStreams(streamIds);
    for (const [id, events] of streams) streams.set(id, events.map((e) => this.registry.upcast(e)));
    return streams;
  }

  async readAll(after: Position, limit: number): Promise<ReadAllBatch> {
    const batch = await this.inner.readAll(after, limit);
    return { ...batch, events: batch.events.map((e) => (this.registry.has(e.type) ? this.registry.upcast(e) : e)) };
  }

  headPosition() {
    return this.inner.headPosition();
  }
  countAfter(after: Position) {
    return this.inner.countAfter(after);
  }
  comparePositions(a: Position, b: Position) {
    return this.inner.comparePositions(a, b);
  }
  onAppended(listener: () => void) {
    return this.inner.onAppended(listener);
  }
  ping() {
    return this.inner.ping();
  }
  close() {
    return this.inner.close();
  }
}
