import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * A real HTTP receiver on 127.0.0.1: answers with `respond` (default 204; a promise holds the answer back) and
 * records each request it answers 2xx, when it answers.
 */
export async function startReceiver(): Promise<{
  url: (path?: string) => string;
  received: Received[];
  respond: (statusFor: (r: Received) => number | Promise<number>) => void;
  close: () => Promise<void>;
  server: Server;
}> {
  const received: Received[] = [];
  let statusFor: (r: Received) => number | Promise<number> = () => 204;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      const r = { path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      const status = await statusFor(r);
      if (status >= 200 && status < 300) received.push(r);
      res.statusCode = status;
      res.end(status >= 300 ? 'nope' : '');
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: (path = '/hooks') => `http://127.0.0.1:${port}${path}`,
    received,
    respond: (f) => { statusFor = f; },
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
    server,
  };
}
