import { createServer, connect, type Server, type Socket } from 'node:net';

/** One client connection through a TcpProxy: the client's socket and the proxy's own to the target. */
export interface ProxiedConnection {
  client: Socket;
  server: Socket;
}

/**
 * A TCP proxy on loopback that pipes each client connection to the target (Postgres, in the tests), for tests that
 * change what crosses it: a subclass says what each connection keeps and what happens to its bytes each way.
 */
export abstract class TcpProxy<C extends ProxiedConnection> {
  readonly connections: C[] = [];
  private listener!: Server;
  port = 0;

  protected abstract connection(client: Socket, server: Socket): C;

  /** bytes from the client to the target; passed on as they come unless a subclass says otherwise */
  protected fromClient(c: C, data: Buffer): void {
    c.server.write(data);
  }

  /** bytes from the target to the client */
  protected fromServer(c: C, data: Buffer): void {
    c.client.write(data);
  }

  async start(targetHost: string, targetPort: number): Promise<void> {
    this.listener = createServer((client) => {
      const c = this.connection(client, connect(targetPort, targetHost));
      this.connections.push(c);
      client.on('data', (d) => this.fromClient(c, d));
      c.server.on('data', (d) => this.fromServer(c, d));
      const end = () => {
        client.destroy();
        c.server.destroy();
      };
      client.on('error', end).on('close', end);
      c.server.on('error', end).on('close', end);
    });
    await new Promise<void>((r) => this.listener.listen(0, '127.0.0.1', r));
    this.port = (this.listener.address() as { port: number }).port;
  }

  async stop(): Promise<void> {
    for (const c of this.connections) {
      c.client.destroy();
      c.server.destroy();
    }
    await new Promise((r) => this.listener.close(r));
  }
}
