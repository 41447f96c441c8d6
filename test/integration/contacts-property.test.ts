import fc from 'fast-check';
import { createTestApp } from '../support/services';
import { KEY_101, provisionAll, testClock } from './contacts-support';

// Property: random upsert sequences (profile fields, three custom fields of different types, values, clears,
// expiries, the clock moving) give the same visible state and versions as a reference model written here.

type FieldKey = 'plan' | 'visits' | 'allergies';
const OPTIONS: Record<FieldKey, string[] | null> = { plan: ['basic', 'gold'], visits: null, allergies: ['latex', 'penicillin', 'pollen'] };
const FIELD_IDS: Record<FieldKey, number> = { plan: 501, visits: 502, allergies: 503 };
const HOUR = 3_600_000;

interface Item { key: FieldKey; value: Array<string | number>; expires?: number | null /* hours from now; null: no expiry; undefined: omitted */ }
type Step =
  | { kind: 'upsert'; fullName?: string | null; email?: string | null; items: Item[] }
  | { kind: 'advance'; hours: number };

const valueArb: Record<FieldKey, fc.Arbitrary<Array<string | number>>> = {
  plan: fc.constantFrom<Array<string | number>>(['basic'], ['gold'], []),
  visits: fc.constantFrom<Array<string | number>>([1], [2], ['2'], []),
  allergies: fc.constantFrom<Array<string | number>>(['latex'], ['pollen', 'latex'], ['latex', 'pollen'], []),
};
const itemArb = (key: FieldKey): fc.Arbitrary<Item> =>
  fc.record({ key: fc.constant(key), value: valueArb[key], expires: fc.option(fc.option(fc.integer({ min: 1, max: 4 }), { nil: null }), { nil: undefined }) }, { requiredKeys: ['key', 'value'] });
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('upsert' as const),
      fullName: fc.option(fc.constantFrom<string | null>('Ana', 'Beto', null), { nil: undefined }),
      email: fc.option(fc.constantFrom<string | null>('a@example.com', null), { nil: undefined }),
      items: fc.subarray(['plan', 'visits', 'allergies'] as FieldKey[]).chain((keys) => fc.tuple(...keys.map(itemArb))),
    }, { requiredKeys: ['kind', 'items'] }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('advance' as const), hours: fc.integer({ min: 1, max: 3 }) }) },
);

// ---- the reference model -------------------------------------------------------------------------------------
interface ModelField { version: number; value: Array<string | number> | null; expiresAt: number | null }
interface Model { exists: boolean; fullName: string | null; email: string | null; fields: Partial<Record<FieldKey, ModelField>> }

const canonical = (key: FieldKey, v: Array<string | number>) =>
  key === 'visits' ? v.map(Number) : key === 'allergies' ? OPTIONS.allergies!.filter((o) => v.includes(o)) : v;
const active = (f: ModelField | undefined, now: number) =>
  f && f.value !== null && (f.expiresAt === null || f.expiresAt > now) ? f : undefined;

function applyModel(m: Model, step: Extract<Step, { kind: 'upsert' }>, now: number) {
  const created = !m.exists;
  m.exists = true;
  if (step.fullName !== undefined) m.fullName = step.fullName;
  else if (created) m.fullName = null;
  if (step.email !== undefined) m.email = step.email;
  else if (created) m.email = null;
  const versioned: Array<{ customFieldId: number; key: string; version: number }> = [];
  for (const item of step.items) {
    const cur = m.fields[item.key];
    const act = active(cur, now);
    const version = (cur?.version ?? 0) + 1;
    if (item.value.length === 0) {
      if (act) {
        m.fields[item.key] = { version, value: null, expiresAt: null };
        versioned.push({ customFieldId: FIELD_IDS[item.key], key: item.key, version });
      }
      continue;
    }
    const value = canonical(item.key, item.value);
    const expiresAt = item.expires === undefined ? (act?.expiresAt ?? null) : item.expires === null ? null : now + item.expires * HOUR;
    if (act && JSON.stringify(act.value) === JSON.stringify(value) && act.expiresAt === expiresAt) continue;
    m.fields[item.key] = { version, value, expiresAt };
    versioned.push({ customFieldId: FIELD_IDS[item.key], key: item.key, version });
  }
  return { created, versioned };
}

function modelView(m: Model, now: number) {
  return (['plan', 'visits', 'allergies'] as FieldKey[]).map((key) => {
    const f = m.fields[key];
    const act = active(f, now);
    return {
      key,
      value: act ? act.value : null,
      version: f ? f.version : null,
      expires_at: f && f.value !== null && f.expiresAt !== null ? new Date(f.expiresAt).toISOString() : null,
    };
  });
}

describe('upsert sequences against a reference model', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  const clock = testClock('2026-03-01T12:00:00.000Z');
  beforeAll(async () => {
    t = await createTestApp({ now: clock.now });
    await provisionAll(t.services);
  });
  afterAll(() => t.close());

  let run = 0;
  it('visible state and versions match the model', async () => {
    // ~100 upserts one after the other, each answered once the read models have it (read-your-writes); the log is read
    // only below the cluster's oldest running transaction (test databases share one cluster; other suites hold
    // transactions open): each may wait ~1 s, past jest's 60 s
    await fc.assert(
      fc.asyncProperty(fc.array(stepArb, { minLength: 1, maxLength: 8 }), async (steps) => {
        run++;
        const phone = `+5491180${String(run).padStart(6, '0')}`;
        clock.set('2026-03-01T12:00:00.000Z');
        const model: Model = { exists: false, fullName: null, email: null, fields: {} };
        for (const step of steps) {
          if (step.kind === 'advance') {
            clock.advance(step.hours * HOUR);
            continue;
          }
          const now = clock.now().getTime();
          const payload: Record<string, unknown> = {
            phone,
            custom_fields: step.items.map((i) => ({
              key: i.key, value: i.value,
              ...(i.expires === undefined ? {} : { expires_at: i.expires === null ? null : new Date(now + i.expires * HOUR).toISOString() }),
            })),
          };
          if (step.fullName !== undefined) payload.full_name = step.fullName;
          if (step.email !== undefined) payload.email = step.email;
          const r = await t.app.inject({ method: 'POST', url: '/api/v1/external/contacts/upsert/', headers: { 'x-api-key': KEY_101 }, payload });
          const expected = applyModel(model, step, now);
          expect(r.statusCode).toBe(expected.created ? 201 : 200);
          const body = r.json();
          expect(body.created).toBe(expected.created);
          expect(body.versionedCustomFields).toEqual(expected.versioned);
          const pick = (fields: Array<Record<string, unknown>>) =>
            fields.filter((f) => ['plan', 'visits', 'allergies'].includes(f.key as string)).map(({ key, value, version, expires_at }) => ({ key, value, version, expires_at }));
          expect(pick(body.contact.customFields)).toEqual(modelView(model, now));
          expect([body.contact.fullName, body.contact.email]).toEqual([model.fullName, model.email]);
        }
        // the read side agrees with the model at the final time
        const g = await t.app.inject({ method: 'GET', url: `/api/v1/external/contacts/?phone=${encodeURIComponent(phone)}`, headers: { 'x-api-key': KEY_101 } });
        const body = g.json();
        expect(body.found).toBe(model.exists);
        if (model.exists) {
          expect([body.contact.full_name, body.contact.email]).toEqual([model.fullName, model.email]);
          expect(body.contact.custom_fields.slice(0, 3).map(({ key, value, version, expires_at }: Record<string, unknown>) => ({ key, value, version, expires_at })))
            .toEqual(modelView(model, clock.now().getTime()));
        }
      }),
      { numRuns: 30, seed: Number(process.env.FC_SEED ?? 20260301), endOnFailure: true },
    );
  }, 360_000);
});
