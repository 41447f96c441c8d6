import { createServer, type IncomingMessage } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import { type AddressInfo, connect, type Socket } from 'node:net';

export interface ConnectProxyOptions {
  /** the address the proxy connects to for a tunnel's host (it resolves names: default the host itself) */
  route?: (host: string) => string;
  /** serve the proxy itself over TLS (an `https://` proxy URL) */
  tls?: { cert: string; key: string };
}

/**
 * A real HTTP CONNECT proxy on 127.0.0.1 (as an operator's egress proxy): records each tunnel's target
 * (`host:port`) and every byte sent through it, and refuses with 403 the targets `refuse` names.
 */
export async function startConnectProxy(refuse: (target: string) => boolean = () => false, options: ConnectProxyOptions = {}): Promise<{ url: string; tunnels: string[]; tunnelled: () => Buffer; close: () => Promise<void> }> {
  const tunnels: string[] = [];
  const bytes: Buffer[] = [];
  const sockets = new Set<Socket>();
  const proxy = options.tls ? createTlsServer(options.tls) : createServer();
  proxy.on('connect', (req: IncomingMessage, client: Socket) => {
    const target = req.url ?? '';
    tunnels.push(target);
    sockets.add(client);
    if (refuse(target)) return void client.end('HTTP/1.1 403 Forbidden\r\n\r\n');
    const [host, port] = target.split(':');
    const upstream: Socket = connect(Number(port), options.route?.(host) ?? host, () => {
      sockets.add(upstream);
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.pipe(client);
      client.on('data', (chunk: Buffer) => bytes.push(chunk));
      client.pipe(upstream);
    });
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  });
  await new Promise<void>((ok) => proxy.listen(0, '127.0.0.1', ok));
  return {
    url: `${options.tls ? 'https' : 'http'}://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
    tunnels,
    /** what the client sent through the tunnels, as the proxy saw it */
    tunnelled: () => Buffer.concat(bytes),
    close: async () => {
      for (const socket of sockets) socket.destroy(); // tunnels are not the server's connections any more
      proxy.closeAllConnections();
      await new Promise<void>((ok) => proxy.close(() => ok()));
    },
  };
}
