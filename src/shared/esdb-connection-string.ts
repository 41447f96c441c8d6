// The EventStoreDB client's own connection-string parser, for the config's check of EVENTSTORE_URL and the start-up
// line naming its hosts. Loaded only when called: its module loads the gRPC client.

type Parser = typeof import('@eventstore/db-client/dist/Client/parseConnectionString');

/** The connection string as the client reads it; throws (with `location` and `expected`) for one it refuses. */
export function parseEsdbConnectionString(url: string): ReturnType<Parser['parseConnectionString']> {
  const { parseConnectionString } = require('@eventstore/db-client/dist/Client/parseConnectionString') as Parser;
  return parseConnectionString(url);
}
