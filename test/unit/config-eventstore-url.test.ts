import { ConfigError, loadConfig } from '../../src/config';

// EVENTSTORE_URL with EVENT_STORE=esdb: a connection string the EventStoreDB client takes, else a ConfigError naming
// the variable, where the string goes wrong and the expected form (found in review: `localhost:2113` reached the
// client, whose parser failed with a stack trace naming neither).

const esdb = (url: string) => loadConfig({ EVENT_STORE: 'esdb', EVENTSTORE_URL: url });

function refusal(url: string): string {
  try {
    esdb(url);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error(`EVENTSTORE_URL ${url} was accepted`);
}

describe('config: EVENTSTORE_URL', () => {
  // each refused string with its corrected form, which is taken
  it.each([
    ['localhost:2113', 'esdb://localhost:2113?tls=false', 'at position 0, expected esdb:// or esdb+discover://'],
    ['http://n1:2113,n2:2113', 'esdb+discover://n1:2113,n2:2113?tls=false', 'at position 0, expected esdb:// or esdb+discover://'],
    ['esdb://127.0.0.1:port?tls=false', 'esdb://127.0.0.1?tls=false', 'at position 17, expected port number'],
    ['esdb://127.0.0.1:2113?tls=no', 'esdb://admin:changeit@127.0.0.1:2113?tls=true', 'at position 26, expected true or false'],
  ])('refuses %s, naming EVENTSTORE_URL, where it goes wrong and the form; takes %s', (url, corrected, where) => {
    const message = refusal(url);
    expect(message).toContain(`EVENTSTORE_URL: not an EventStoreDB connection string (${where}); the form is esdb://host:2113?tls=false`);
    expect(message.split('\n')).toHaveLength(1);
    expect(esdb(corrected).eventStore).toEqual({ kind: 'esdb', url: corrected });
  });

  it('never repeats the text it refused (it may hold a password)', () => {
    expect(refusal('esdb://admin:s3cret')).not.toContain('s3cret');
  });

  it('is required with EVENT_STORE=esdb, the message giving the form; unused, and so unchecked, otherwise', () => {
    expect(() => loadConfig({ EVENT_STORE: 'esdb' })).toThrow(/EVENTSTORE_URL: required when EVENT_STORE=esdb \(esdb:\/\/host:2113\?tls=false\)/);
    expect(loadConfig({ EVENTSTORE_URL: 'localhost:2113' }).eventStore).toEqual({ kind: 'postgres' });
  });
});
