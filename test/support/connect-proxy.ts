import { createServer, type IncomingMessage } from 'node:http';
import { type AddressInfo, connect, type Socket } from 'node:net';

/**
 * A real HTTP CONNECT proxy on 127.0.0.1 (as an operator's egress proxy): records each tunnel's target
 * (`host:port`) and refuses with 403 the targets `refuse` names.
 */
export async function startConnectProxy(refuse: (target: string) => boolean = () => false): Promise<{ url: string; tunnels: string[]; close: () => Promise<void> }> {
  const tunnels: string[] = [];
  const proxy = createServer();
  proxy.on('connect', (req: IncomingMessage, client: Socket) => {
    const target = req.url ?? '';
    tunnels.push(target);
    if (refuse(target)) return void client.end('HTTP/1.1 403 Forbidden\r\n\r\n');
    const [host, port] = target.split(':');
    const upstream = connect(Number(port), host, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  });
  await new Promise<void>((ok) => proxy.listen(0, '127.0.0.1', ok));
  return {
    url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
    tunnels,
    close: async () => {
      proxy.closeAllConnections();
      await new Promise<void>((ok) => proxy.close(() => ok()));
    },
  };
}
