import { DeadlineExceededError, NotLeaderError, UnavailableError } from '@eventstore/db-client';
import { againOnLostConnection, isDatabaseUnavailable, isLostConnection } from '../../src/shared/retry';

// EventStoreDB's client errors in the lost-connection classifier (review 16d): on EventStoreDB the appends tried again
// on a lost connection (againOnLostConnection: the bulk's commit point, the send's record) were not, and a read losing
// its event store answered 500, not 503 (src/http/errors.ts). Built as the client builds them (a gRPC error's fields).
const grpc = (code: number, details: string) => Object.assign(new Error(`${code} ${details}`), { code, details, metadata: undefined });

describe('EventStoreDB connection errors', () => {
  it('unavailable and not-leader are a lost connection; a deadline or a refusal of the append is not', () => {
    expect(isLostConnection(new UnavailableError(grpc(14, 'UNAVAILABLE: No connection established') as never))).toBe(true);
    const leaderAt = { getMap: () => ({ 'leader-endpoint-host': 'node2', 'leader-endpoint-port': '2113' }) };
    expect(isLostConnection(new NotLeaderError({ ...grpc(5, 'Leader info available'), metadata: leaderAt } as never))).toBe(true);
    expect(isDatabaseUnavailable(new UnavailableError(grpc(14, 'UNAVAILABLE') as never))).toBe(true);
    expect(isLostConnection(new DeadlineExceededError(grpc(4, 'DEADLINE_EXCEEDED') as never))).toBe(false);
    expect(isLostConnection(Object.assign(new Error('wrong expected version'), { type: 'wrong-expected-version' }))).toBe(false);
    expect(isLostConnection({ type: 'unavailable' })).toBe(false); // an Error only
  });

  it('an append that lost its EventStoreDB connection is tried again', async () => {
    let calls = 0;
    const retried: number[] = [];
    const result = await againOnLostConnection(new UnavailableError(grpc(14, 'UNAVAILABLE: Connection dropped') as never), async () => {
      calls++;
      return 'appended';
    }, (_err, attempt) => retried.push(attempt));
    expect({ result, calls, retried }).toEqual({ result: 'appended', calls: 1, retried: [1] });
  });
});
