import { createServer, connect, type Server, type Socket } from 'node:net';

/** A TCP proxy to Postgres whose connections can be blackholed: bytes are dropped, nothing is closed. */
export class BlackholeProxy {
  readonly connections: Array<{ client: Socket; server: Socket; frozen: boolean }> = [];
  private server!: Server;
  port = 0;

  async start(targetHost: string, targetPort: number): Promise<void> {
    this.server = createServer((client) => {
      const server = connect(targetPort, targetHost);
      const c = { client, server, frozen: false };
      this.connections.push(c);
      client.on('data', (d) => c.frozen || server.write(d));
      server.on('data', (d) => c.frozen || client.write(d));
      const end = () => {
        client.destroy();
        server.destroy();
      };
      client.on('error', end).on('close', end);
      server.on('error', end).on('close', end);
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as { port: number }).port;
  }

  async stop(): Promise<void> {
    for (const c of this.connections) {
      c.client.destroy();
      c.server.destroy();
    }
    await new Promise((r) => this.server.close(r));
  }
}

/** A proxy in front of the database at `url`, and the same url through it. */
export async function blackholeProxyFor(url: string): Promise<{ proxy: BlackholeProxy; url: string }> {
  const target = new URL(url);
  const proxy = new BlackholeProxy();
  await proxy.start(target.hostname, Number(target.port || 5432));
  const viaProxy = new URL(url);
  viaProxy.hostname = '127.0.0.1';
  viaProxy.port = String(proxy.port);
  return { proxy, url: viaProxy.toString() };
}
