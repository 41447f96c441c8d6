import { createTestApp } from '../support/services';

// A write whose database failed once its handler ran answers 500 with its outcome unknown and what makes the retry
// safe (src/http/errors.ts, outcomeUnknownMessage; review 16c). Since 2026-11-28 the document says so on every write
// (a 'Noticed' item: generated clients had no such answer), and on no read (a read answers 503 wherever it failed).
describe('the outcome-unknown 500 in the OpenAPI document', () => {
  it('is documented on every API write, in its error shape, and on no read', async () => {
    const t = await createTestApp();
    try {
      const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json() as {
        paths: Record<string, Record<string, { responses: Record<string, { description?: string; content?: Record<string, { schema: unknown }> }> }>>;
      };
      const writes: string[] = [];
      for (const [path, operations] of Object.entries(doc.paths)) {
        if (!path.startsWith('/api/')) continue;
        for (const [method, operation] of Object.entries(operations)) {
          const answer = operation.responses['500'];
          if (method === 'get' || method === 'head') {
            expect({ path, method, documented: answer !== undefined }).toEqual({ path, method, documented: false });
            continue;
          }
          writes.push(`${method.toUpperCase()} ${path}`);
          expect({ path, method, description: answer?.description }).toEqual({ path, method, description: expect.stringContaining('its outcome is unknown') });
          expect(answer?.content?.['application/json']?.schema).toBeDefined();
        }
      }
      expect(writes.length).toBeGreaterThanOrEqual(11);
    } finally {
      await t.close();
    }
  });
});
