// Configuration of the Kafka transport: its options, the slice of a pino logger it writes to, and the routing
// of kafkajs's own log into that logger.
import { logLevel as KafkaLogLevel, type LogEntry, type logCreator } from 'kafkajs';

/** The slice of a pino logger this adapter uses. */
export interface TransportLogger {
  debug?(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface KafkaTransportOptions {
  brokers: string[];
  clientId: string;
  logger?: TransportLogger;
  /** partitions of topics this transport creates; default: the broker's num.partitions */
  numPartitions?: number;
  /** partitions one subscription handles at the same time (default 3) */
  partitionsConsumedConcurrently?: number;
  /** consumer group session timeout (default 30 s; the broker bounds it by group.min/max.session.timeout.ms) */
  sessionTimeoutMs?: number;
  /** consumer heartbeat interval (default: a tenth of the session timeout, at most 3 s) */
  heartbeatIntervalMs?: number;
  /** how long the broker holds a fetch waiting for new records (default 500 ms) */
  maxWaitTimeMs?: number;
  /** commit at least this often inside a long batch (default 1000 ms) */
  commitIntervalMs?: number;
  /** transient-error backoff: first delay and cap (default 50 ms .. 5 s) */
  retryInitialMs?: number;
  retryMaxMs?: number;
  /** publish() rejects after this long without an ack (default 30 s) */
  publishTimeoutMs?: number;
}

const KAFKAJS_LEVEL_NAMES: Record<number, 'error' | 'warn' | 'info' | 'debug'> = {
  [KafkaLogLevel.ERROR]: 'error',
  [KafkaLogLevel.WARN]: 'warn',
  [KafkaLogLevel.INFO]: 'info',
  [KafkaLogLevel.DEBUG]: 'debug',
};

/** Routes kafkajs's own log (warn and error only) to the given logger. */
export function kafkajsLogCreator(logger: TransportLogger): logCreator {
  return () =>
    ({ namespace, level, log }: LogEntry) => {
      const { message, timestamp: _timestamp, logger: _name, ...extra } = log;
      const fields = { component: 'kafkajs', namespace, ...extra };
      const method = KAFKAJS_LEVEL_NAMES[level] ?? 'warn';
      if (method === 'debug') logger.debug?.(fields, message);
      else logger[method](fields, message);
    };
}
