import { loadMigrations } from '../../src/adapters/postgres/migrations';
import { findWebhookEndpoint, signingSecrets } from '../../src/projections/webhooks/queries';
import { SHOP } from '../support/sends';
import { useWebhookTestBed, type WebhookTestBed } from '../support/webhook-receiver';

// The endpoints read model's `older_secrets` (docs/webhooks.md, "Rotations within 24 h") comes to a live table by
// migration 0012, in place: no projection version bump, whose rebuild would leave the live table, which every
// endpoint read and the webhook workers use, without the column until the swap.

describe('older_secrets on a live endpoints table made before it', () => {
  let t: WebhookTestBed['t'];
  let register: WebhookTestBed['register'];
  useWebhookTestBed((bed) => ({ t, register } = bed));

  it('the migration adds the column in place: the endpoint reads and rotations work, with no rebuild', async () => {
    const ep = await register('/older-secrets-upgrade');
    // the table as the version before made it
    await t.db.pool.query('ALTER TABLE rm_webhooks.endpoints DROP COLUMN older_secrets');
    const migration = loadMigrations().find((m) => m.name === 'webhook_older_secrets')!;
    await t.db.pool.query(migration.sql);
    const before = await findWebhookEndpoint(t.db.pool, SHOP.companyId, ep.id);
    expect(before?.olderSecrets).toEqual([]);
    for (let i = 0; i < 3; i++) {
      const res = await t.app.inject({ method: 'POST', url: `/api/v1/webhook-endpoints/${ep.id}/rotate-secret/`, headers: { 'x-api-key': SHOP.key } });
      expect(res.statusCode).toBe(200);
    }
    const after = (await findWebhookEndpoint(t.db.pool, SHOP.companyId, ep.id))!;
    expect(signingSecrets(after, t.services.now())).toHaveLength(4); // the current, the previous and two older ones
    const cp = await t.db.pool.query<{ version: number }>(`SELECT version FROM projections.checkpoints WHERE name = 'webhooks'`);
    expect(cp.rows[0].version).toBe(1);
  });
});
