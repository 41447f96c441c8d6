// Review 13 (2026-11-28), what a provider network failure tells the API client (docs/reliability.md, "What is
// logged"): a `502 PROVIDER_UNAVAILABLE` body and the recorded TemplateSendRejected quoted the network error,
// `provider unreachable: connect ECONNREFUSED <address>`: the address connected to, an egress proxy's or an internal
// gateway's when PROVIDER_BASE_URL points at one. Now a fixed text per kind of failure (with its code); the error
// itself goes to the operator's log (the adapter's `logger`).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CloudApiProvider } from '../../src/adapters/provider/cloud-api';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { ProviderError } from '../../src/ports/provider';
import { eventually, SHOP, sendsFixture } from '../support/sends';
import { createTestApp } from '../support/services';

const request = { phoneNumberId: '109876543210001', to: '+5491155551234', template: 'welcome', language: 'es', components: [] };
const REFUSED = 'provider unreachable: connection refused (ECONNREFUSED)';

async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((ok) => s.listen(0, '127.0.0.1', ok));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((ok) => s.close(() => ok()));
  return port;
}

async function refusal(p: Promise<unknown>): Promise<ProviderError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(ProviderError);
  return err as ProviderError;
}

describe('review13: provider network failures without the address connected to', () => {
  it('a refused connection: a fixed text; the log has the error with the address (one line per kind per 10 s)', async () => {
    const port = await closedPort();
    const logged: Array<{ obj: any; msg?: string }> = [];
    const p = new CloudApiProvider({
      baseUrl: `http://127.0.0.1:${port}`, apiVersion: 'v21.0', accessToken: 't', maxAttempts: 3, sleep: async () => {},
      logger: { warn: (obj, msg) => void logged.push({ obj, msg }) },
    });
    try {
      const err = await refusal(p.sendTemplate(request));
      expect({ code: err.code, retryable: err.retryable, message: err.message, attempts: err.details?.attempts })
        .toEqual({ code: 'network_error', retryable: true, message: REFUSED, attempts: 3 });
      expect(logged).toHaveLength(1);
      expect(logged[0]).toMatchObject({ msg: REFUSED, obj: { code: 'network_error' } });
      expect(String(logged[0].obj.err.message)).toContain(`127.0.0.1:${port}`);
    } finally {
      await p.close();
    }
  });

  it('a connection lost after the request was written: a fixed text, not the socket error', async () => {
    const dropping = createServer((req) => req.on('data', () => undefined).on('end', () => req.socket.destroy()));
    await new Promise<void>((ok) => dropping.listen(0, '127.0.0.1', ok));
    const port = (dropping.address() as AddressInfo).port;
    const logged: unknown[] = [];
    const p = new CloudApiProvider({ baseUrl: `http://127.0.0.1:${port}`, apiVersion: 'v21.0', accessToken: 't', sleep: async () => {}, logger: { warn: (obj) => void logged.push(obj) } });
    try {
      const err = await refusal(p.sendTemplate(request));
      expect({ code: err.code, message: err.message }).toEqual({ code: 'connection_lost', message: 'connection to the provider lost: connection closed (UND_ERR_SOCKET)' });
      expect(logged).toHaveLength(1);
    } finally {
      await p.close();
      await new Promise<void>((ok) => dropping.close(() => ok()));
    }
  });

  it('the 502 body and the recorded rejection say what failed, without the address (real HTTP, real Postgres)', async () => {
    const port = await closedPort();
    const provider = new CloudApiProvider({ baseUrl: `http://127.0.0.1:${port}`, apiVersion: 'v21.0', accessToken: 't', maxAttempts: 1 });
    const t = await createTestApp({ provider });
    try {
      await seedFixture(t.services, sendsFixture(), { actor: 'test' });
      const address = await t.app.listen({ port: 0, host: '127.0.0.1' });
      const res = await fetch(`${address}/api/v1/platform-templates/send/`, {
        method: 'POST',
        headers: { 'x-api-key': SHOP.key, 'content-type': 'application/json' },
        body: JSON.stringify({ phone_number_id: SHOP.number.phoneNumberId, template_name: 'welcome', recipient_phone: '+5491155551234' }),
      });
      const body = await res.text();
      expect({ status: res.status, body: JSON.parse(body) }).toEqual({ status: 502, body: { error: `The provider is unavailable (network_error): ${REFUSED}` } });
      expect(body).not.toContain(String(port));
      const rejected = await eventually(async () => {
        const r = await t.db.pool.query(`SELECT data FROM es.events WHERE type = 'TemplateSendRejected'`);
        return r.rows.map((x) => ({ code: x.data.code, message: x.data.message }));
      }, [{ code: 'network_error', message: REFUSED }]);
      expect(rejected).toEqual([{ code: 'network_error', message: REFUSED }]);
    } finally {
      await t.close();
    }
  });
});
