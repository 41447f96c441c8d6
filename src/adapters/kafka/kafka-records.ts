// Conversions between kafkajs messages and transport records: values written as JSON text, headers read as
// strings, and a fetched message as an incoming record.
import type { IHeaders, KafkaMessage } from 'kafkajs';
import type { IncomingRecord } from '../../ports/transport';

export function headersToStrings(headers: IHeaders | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (value === undefined) continue;
    const first = Array.isArray(value) ? value[0] : value;
    if (first !== undefined) out[name] = first.toString();
  }
  return out;
}

export const encodeValue = (value: unknown) => JSON.stringify(value === undefined ? null : value);

/** A Kafka message as an incoming record, its value still the raw text (parsed as JSON by the caller). */
export function rawRecord(topic: string, partition: number, message: KafkaMessage): IncomingRecord {
  return {
    topic,
    key: message.key?.toString('utf8') ?? null,
    value: message.value?.toString('utf8') ?? null,
    partition,
    offset: message.offset,
    headers: headersToStrings(message.headers),
  };
}
