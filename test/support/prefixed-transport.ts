import type { RecordTransport } from '../../src/ports/transport';

/**
 * A transport whose topics and consumer groups carry a prefix: suites sharing one Kafka broker (and the fixed
 * topic names of the service) stay out of each other's way. Handlers see the unprefixed topic.
 */
export function prefixedTransport(inner: RecordTransport, prefix: string): RecordTransport {
  const strip = (topic: string) => (topic.startsWith(prefix) ? topic.slice(prefix.length) : topic);
  return {
    kind: inner.kind,
    publish: (topic, records) => inner.publish(prefix + topic, records),
    subscribe: (topic, handler, options) =>
      inner.subscribe(prefix + topic, (r) => handler({ ...r, topic: strip(r.topic) }), {
        ...options,
        groupId: prefix + options.groupId,
        onDeadLetter: options.onDeadLetter ? (r, reason) => options.onDeadLetter!({ ...r, topic: strip(r.topic) }, reason) : undefined,
      }),
    ping: () => inner.ping(),
    close: () => inner.close(),
  };
}
