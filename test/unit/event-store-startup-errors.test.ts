import { classifyStartupError, cliFailureText } from '../../src/cli/startup-errors';
import { EventStoreUnreachableError, eventStoreTarget } from '../../src/main';
import { isAccessRefused, NoAnswerError, waitUntilAnswers } from '../../src/shared/startup-step';

// EventStoreDB unreachable at start: the cause names EVENTSTORE_URL's hosts (never its credentials) and the reason the
// gRPC client gives; the fix names EVENTSTORE_URL. (The e2e suite covers a closed port; these are the other reasons.)

const unreachable = (message: string | Error) =>
  new EventStoreUnreachableError('db.example:2113', typeof message === 'string' ? new Error(message) : message, 5_000);

describe('start-up errors: EventStoreDB', () => {
  it.each([
    ['esdb://admin:changeit@db.example:2113?tls=false', 'db.example:2113'],
    ['esdb+discover://n1:2113,n2:2113/?tls=true', 'n1:2113,n2:2113'],
    ['esdb://eventstore', 'eventstore:2113'],
    ['esdb://admin:s3cr/etPassw0rd@db:2113?tls=false', 'db:2113'], // a password with a slash is not printed
    ['esdb://admin:pa?ss@db:2113', 'db:2113'],
  ])('names %s by its hosts alone: %s', (url, target) => {
    expect(eventStoreTarget(url)).toBe(target);
  });

  it('a host that does not resolve', () => {
    expect(classifyStartupError(unreachable('14 UNAVAILABLE: Name resolution failed for target dns:db.example:2113'))).toEqual({
      cause: 'the host of EVENTSTORE_URL (db.example:2113) does not resolve',
      fix: 'correct the host in EVENTSTORE_URL',
    });
  });

  it('a server that never answers', () => {
    const problem = classifyStartupError(unreachable(new NoAnswerError('no answer within 5000 ms')));
    expect(problem.cause).toBe('EventStoreDB at db.example:2113 (EVENTSTORE_URL) did not answer within 5 s');
    expect(problem.fix).toMatch(/^start EventStoreDB or correct the host and port in EVENTSTORE_URL \(esdb:\/\/host:2113\?tls=false /);
  });

  it('another reason is quoted on the one line', () => {
    const problem = classifyStartupError(unreachable('14 UNAVAILABLE: Connection dropped\n  (TLS handshake)'));
    expect(problem.cause).toBe('EventStoreDB at db.example:2113 (EVENTSTORE_URL) did not answer within 5 s (14 UNAVAILABLE: Connection dropped (TLS handshake))');
  });

  // review 16d: refused credentials were reported as "did not answer", with a fix about the host and port, after
  // waiting the whole STARTUP_WAIT_S
  it.each([
    ['the client\'s AccessDeniedError', Object.assign(new Error('16 UNAUTHENTICATED: Bad credentials'), { type: 'access-denied' })],
    ['a PERMISSION_DENIED answer', new Error('7 PERMISSION_DENIED: Access denied')],
  ])('refused credentials (%s): named as such, with the fix of the credentials', (_what, cause) => {
    const problem = classifyStartupError(unreachable(cause));
    expect(problem.cause).toBe(`EventStoreDB at db.example:2113 (EVENTSTORE_URL) refused the credentials of EVENTSTORE_URL (${cause.message})`);
    expect(problem.fix).toBe('correct the user name and password in EVENTSTORE_URL (esdb://user:password@host:2113), or give that user access');
  });

  it('start-up stops waiting at refused credentials (waiting cannot mend them), and waits through other failures', async () => {
    let calls = 0;
    const refused = Object.assign(new Error('16 UNAUTHENTICATED'), { type: 'access-denied' });
    await expect(waitUntilAnswers(async () => { calls++; throw refused; }, 60_000, 10, isAccessRefused)).rejects.toBe(refused);
    expect(calls).toBe(1);
    let tries = 0;
    await waitUntilAnswers(async () => { if (++tries < 3) throw new Error('14 UNAVAILABLE'); }, 60_000, 10, isAccessRefused);
    expect(tries).toBe(3);
  });

  it('a one-shot command prints the start-up line, without a stack trace', () => {
    const text = cliFailureText(unreachable('14 UNAVAILABLE: No connection established. Last error: Error: connect ECONNREFUSED 10.0.0.9:2113.'), false);
    expect(text).toMatch(/^switchboard: cannot start: EventStoreDB at db\.example:2113 \(EVENTSTORE_URL\) is not reachable \(connection refused; retried for 5 s\); start EventStoreDB/);
    expect(text.split('\n')).toHaveLength(1);
  });
});
