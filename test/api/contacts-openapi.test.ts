import { createTestApp } from '../support/services';

describe('contacts in the OpenAPI document', () => {
  it('documents the three endpoints with their query, body and responses', async () => {
    const t = await createTestApp();
    try {
      const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
      const lookup = doc.paths['/api/v1/contact-lookup/'].get;
      expect(lookup.parameters.map((p: { name: string }) => p.name)).toEqual(['phone']);
      expect(Object.keys(lookup.responses)).toEqual(['200', '400', '401', '403', '429', '503']); // 429: the API key's rate limit; 503: a graceful stop
      expect(Object.keys(doc.paths['/api/v1/external/contacts/'].get.responses)).toEqual(['200', '400', '401', '409', '429', '503']);
      const upsert = doc.paths['/api/v1/external/contacts/upsert/'].post;
      expect(Object.keys(upsert.responses)).toEqual(['200', '201', '400', '401', '409', '413', '415', '422', '429', '500', '503']); // 409/422: Idempotency-Key; 413/415/500/503: shared refusals
      expect(Object.keys(upsert.requestBody.content['application/json'].schema.properties)).toEqual([
        'phone', 'contact_list_id', 'full_name', 'email', 'source', 'source_detail', 'profile_picture', 'custom_fields',
      ]);
    } finally {
      await t.close();
    }
  });
});
