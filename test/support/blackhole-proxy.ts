import type { Socket } from 'node:net';
import { type ProxiedConnection, TcpProxy } from './tcp-proxy';

/** A TCP proxy to Postgres whose connections can be blackholed: bytes are dropped, nothing is closed. */
export class BlackholeProxy extends TcpProxy<ProxiedConnection & { frozen: boolean }> {
  protected connection(client: Socket, server: Socket) {
    return { client, server, frozen: false };
  }

  protected override fromClient(c: ProxiedConnection & { frozen: boolean }, data: Buffer): void {
    if (!c.frozen) super.fromClient(c, data);
  }

  protected override fromServer(c: ProxiedConnection & { frozen: boolean }, data: Buffer): void {
    if (!c.frozen) super.fromServer(c, data);
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
