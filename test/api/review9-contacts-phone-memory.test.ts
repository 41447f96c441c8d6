import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createTestApp } from '../support/services';
import { KEY_101, provisionAll } from '../integration/contacts-support';

// Review 9: a phone of any length is a client's input. normalizePhone remembers its recent answers (10,000 of them)
// keyed by the raw input, so the contacts endpoints must not hand it a megabyte-long "phone": before the fix every
// such request kept its body's phone string alive (10,000 requests of 1 MB: 10 GB, the process dies of it).

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const heapAfterGc = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};

describe('review 9: contacts phone input of any length', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  beforeAll(async () => {
    t = await createTestApp();
    await provisionAll(t.services);
  });
  afterAll(() => t.close());

  it('long phones are answered as before and not kept in memory', async () => {
    const phone = '+5491170029001';
    expect((await t.app.inject({ method: 'POST', url: '/api/v1/external/contacts/upsert/', headers: { 'x-api-key': KEY_101 }, payload: { phone } })).statusCode).toBe(201);
    const before = heapAfterGc();
    const N = 120;
    const PAD = 800_000;
    for (let i = 0; i < N; i++) {
      // a valid number inside blanks (trimmed, it is the contact's number), or garbage: both distinct per request
      const raw = i % 2 === 0 ? `${phone}${' '.repeat(PAD + i)}` : `${'9'.repeat(PAD + i)}`;
      const r = await t.app.inject({ method: 'POST', url: '/api/v1/external/contacts/upsert/', headers: { 'x-api-key': KEY_101 }, payload: { phone: raw } });
      if (i % 2 === 0) expect({ status: r.statusCode, created: r.json().created, phone: r.json().contact.phone }).toEqual({ status: 200, created: false, phone });
      else expect(r.statusCode).toBe(400);
    }
    for (let i = 0; i < 20; i++) {
      const r = await t.app.inject({ method: 'GET', url: `/api/v1/contact-lookup/?phone=${'7'.repeat(PAD + i)}`, headers: { 'x-api-key': KEY_101 } });
      expect(r.json().found).toBe(false);
    }
    const grownMb = (heapAfterGc() - before) / 1e6;
    // kept: about (N + 20) * 0.8 MB = 110 MB; not kept: what the app's caches and the JIT take, a few MB
    expect(grownMb).toBeLessThan(40);
  });
});
