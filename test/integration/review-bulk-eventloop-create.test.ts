import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { seedFixture } from '../../src/commands/provisioning/seed';
import { Turns, TURN_MAX_ITEMS } from '../../src/shared/turns';
import {
  checkRecipients,
  checkRecipientsInTurns,
  checkRecipientVariables,
  checkVariablesAndDeduplicate,
  deduplicate,
} from '../../src/commands/bulk/input';
import { BULK_CO, bulkFixture, ORDER_TEMPLATE, phones } from '../support/bulk';
import { createTestApp } from '../support/services';

// A send-bulk of 100,000 recipients checked, normalized and deduplicated every phone in one synchronous piece
// (seconds): every other request of the process waited for it. Now its loops give the event loop a turn between
// slices (docs/bulk.md, "Event loop"). Proven without timing: the real normalizePhone is counted (wrapped, not
// replaced), and a /healthz sent to the same server over real HTTP when the creation's first phone is normalized is
// answered while phones are still left to normalize, and before the creation's 202. Before the fix it was answered
// only once all 100,000 had been.

const counter = { calls: 0, onCall: undefined as ((n: number) => void) | undefined };
jest.mock('../../src/shared/phone', () => {
  const real = jest.requireActual('../../src/shared/phone');
  return {
    ...real,
    normalizePhone: (raw: string) => {
      counter.calls++;
      counter.onCall?.(counter.calls);
      return real.normalizePhone(raw);
    },
  };
});

type T = Awaited<ReturnType<typeof createTestApp>>;
const BASE = '/api/v1/platform-templates';
// enough recipients for several slices of TURN_MAX_ITEMS; 100,000 took over 30 s on a loaded machine, past the
// server's idle-socket timeout (the connection was cut while the creation still ran)
const N = 20_000;

function send(url: string, method: string, path: string, body?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}${path}`, {
      method,
      headers: body === undefined ? {} : { 'x-api-key': BULK_CO.key, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('a large send-bulk (20,000 recipients) gives the event loop turns', () => {
  let t: T;
  let url: string;

  beforeAll(async () => {
    t = await createTestApp({ now: () => new Date('2026-03-01T10:00:00.000Z') });
    await seedFixture(t.services, bulkFixture(), { actor: 'test' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    counter.onCall = undefined;
    await t?.close();
  });

  it('a /healthz sent while the creation normalizes its phones is answered before the phones are all normalized', async () => {
    // valid numbers in the provider's spelling (Argentina without the 9): the costliest to normalize
    const recipients = phones(N, '+5411750').map((phone, i) => ({ phone, variables: { name: `Cliente ${i}` }, button_variables: { button_0: `A${i}` } }));
    const payload = JSON.stringify({ phone_number_id: BULK_CO.unlimited.phoneNumberId, template_name: 'order_update', recipients });

    const order: string[] = [];
    let healthAnsweredAt: number | undefined;
    let immediateRanAt: number | undefined;
    let health: Promise<{ status: number; body: string }> | undefined;
    counter.calls = 0;
    counter.onCall = (n) => {
      if (n !== 1) return;
      // the creation's first normalization: from here on, the server is inside the creation's phone loop
      setImmediate(() => {
        immediateRanAt = counter.calls;
      });
      health = send(url, 'GET', '/healthz').then((r) => {
        healthAnsweredAt = counter.calls;
        order.push('healthz');
        return r;
      });
    };
    const created = await send(url, 'POST', `${BASE}/send-bulk/`, payload).then((r) => {
      order.push('send-bulk');
      return r;
    });
    counter.onCall = undefined;

    expect(created.status).toBe(202);
    expect(JSON.parse(created.body)).toMatchObject({ total_recipients: N, unique_recipients: N, status: 'queued' });
    expect(health).toBeDefined();
    expect(await health).toEqual({ status: 200, body: JSON.stringify({ status: 'ok' }) });
    expect(order).toEqual(['healthz', 'send-bulk']);
    // every phone was normalized once (no phone repeats) ...
    expect(counter.calls).toBe(N);
    // ... and the other request, and a setImmediate queued at the first phone, ran while phones were left
    expect(immediateRanAt).toBeLessThanOrEqual(TURN_MAX_ITEMS);
    expect(healthAnsweredAt).toBeLessThan(N);
  });
});

describe('the chunked checks give the answers of the one-piece ones', () => {
  const variables = (i: number) => ({ name: `Cliente ${i}` });
  const shape = { variables: ORDER_TEMPLATE.variables, buttons: ORDER_TEMPLATE.buttons } as never;

  it('shape and phone format: the same recipients, the same 400 messages', async () => {
    const good = phones(5000, '+54911760').map((phone, i) => ({ phone, variables: variables(i) }));
    const bad: unknown[] = good.map((r, i) =>
      i % 97 === 3 ? { phone: r.phone.slice(1) }
        : i % 89 === 5 ? { phone: r.phone, variables: [1] }
          : i % 83 === 7 ? 'x'
            : i % 79 === 9 ? { phone: r.phone, button_variables: { a: { b: { c: 1 } } }, variables: { deep: JSON.parse('['.repeat(40) + ']'.repeat(40)) } }
              : r);
    for (const list of [good, bad, [...good, ...good]]) {
      const turns = new Turns();
      const chunked = await checkRecipientsInTurns(list, turns);
      expect(chunked).toEqual(checkRecipients(list));
      expect(turns.yields).toBeGreaterThan(0);
    }
    expect((await checkRecipientsInTurns(new Array(100_001).fill({ phone: '+5491155551234' }))).ok).toBe(false);
  });

  it('variables and deduplication in one pass: the same kept recipients, counts and messages', async () => {
    const base = phones(3000, '+54911770').map((phone, i) => ({ phone, variables: variables(i), buttonVariables: { button_0: `A${i}` } }));
    // repeats: the same text, the provider's spelling without the 9, the `15` spelling
    const repeated = [
      ...base,
      ...base.slice(0, 500),
      ...base.slice(500, 900).map((r) => ({ ...r, phone: `+54${r.phone.slice(4)}` })),
      ...base.slice(900, 1000).map((r) => ({ ...r, phone: `+5411${'15'}${r.phone.slice(6)}` })),
      { phone: '+999123456', variables: variables(1), buttonVariables: { button_0: 'x' } },
      { phone: '+999123456', variables: variables(2), buttonVariables: { button_0: 'y' } },
    ];
    const invalid = repeated.map((r, i) => (i % 301 === 7 ? { ...r, variables: {} } : r));
    for (const list of [repeated, invalid]) {
      const errors = checkRecipientVariables(shape, list);
      const expected = errors ? { ok: false, messages: errors } : { ok: true, ...deduplicate(list) };
      const turns = new Turns();
      expect(await checkVariablesAndDeduplicate(shape, list, turns)).toEqual(expected);
      expect(turns.yields).toBeGreaterThan(0);
    }
    expect(deduplicate(repeated).unique).toBe(3001);
  });
});
