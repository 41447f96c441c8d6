import { createTestApp } from '../support/services';

// SDK generators name a client's methods after each operation's operationId (without one they make names up from
// the path: `postApiV1PlatformTemplatesSendSend`). Every API operation has its own, stable: renaming one breaks the
// clients generated from the document, so the whole list is pinned here.
describe('operationId of every operation in the OpenAPI document', () => {
  it('names each API operation once, in lowerCamelCase', async () => {
    const t = await createTestApp();
    try {
      const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json() as {
        paths: Record<string, Record<string, { operationId?: string }>>;
      };
      const ids: Record<string, string | undefined> = {};
      for (const [path, operations] of Object.entries(doc.paths)) {
        for (const [method, operation] of Object.entries(operations)) ids[`${method.toUpperCase()} ${path}`] = operation.operationId;
      }
      expect(ids).toEqual({
        'GET /api/v1/business-info/': 'getBusinessInfo',
        'GET /api/v1/business-hours/': 'listBusinessHours',
        'GET /api/v1/holidays/': 'listHolidays',
        'GET /api/v1/contact-lookup/': 'lookUpContact',
        'GET /api/v1/external/contacts/': 'getContact',
        'POST /api/v1/external/contacts/upsert/': 'upsertContact',
        'GET /api/v1/business-accounts/': 'listBusinessAccounts',
        'POST /api/v1/platform-templates/send/': 'sendTemplateMessage',
        'GET /api/v1/platform-templates/messages/{message_id}/': 'getMessageStatus',
        'GET /api/v1/qualitative-export/messages': 'exportMessages',
        'POST /api/v1/platform-templates/send-bulk/': 'createBulkSend',
        'GET /api/v1/platform-templates/bulk-sends/': 'listBulkSends',
        'GET /api/v1/platform-templates/bulk-sends/{bulk_send_id}/': 'getBulkSend',
        'GET /api/v1/platform-templates/bulk-sends/{bulk_send_id}/messages/': 'listBulkSendMessages',
        'POST /api/v1/platform-templates/bulk-sends/{bulk_send_id}/cancel/': 'cancelBulkSend',
        'POST /api/v1/webhook-endpoints/': 'createWebhookEndpoint',
        'GET /api/v1/webhook-endpoints/': 'listWebhookEndpoints',
        'GET /api/v1/webhook-endpoints/{id}/': 'getWebhookEndpoint',
        'PATCH /api/v1/webhook-endpoints/{id}/': 'updateWebhookEndpoint',
        'DELETE /api/v1/webhook-endpoints/{id}/': 'deleteWebhookEndpoint',
        'POST /api/v1/webhook-endpoints/{id}/rotate-secret/': 'rotateWebhookEndpointSecret',
        'GET /api/v1/webhook-endpoints/{id}/deliveries/': 'listWebhookDeliveries',
        'POST /api/v1/webhook-endpoints/{id}/deliveries/{delivery_id}/retry/': 'retryWebhookDelivery',
        'POST /api/v1/webhook-endpoints/{id}/recover/': 'recoverWebhookDeliveries',
        'POST /api/v1/webhook-endpoints/{id}/test/': 'sendWebhookTestEvent',
      });
      const names = Object.values(ids);
      expect(new Set(names).size).toBe(names.length);
      for (const name of names) expect(name).toMatch(/^[a-z][A-Za-z]+$/);
    } finally {
      await t.close();
    }
  });
});
