import { createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { type SealedBox, sealedBox } from '../../shared/sealed-box';

// Signing secrets: `whsec_` + base64 of 24 random bytes (Standard Webhooks). In events and read models only as
// AES-256-GCM ciphertext under a key derived (HKDF-SHA256) from the server's API_KEY_PEPPER (../../shared/sealed-box.ts),
// so the event log that analytics replays never holds a usable secret (docs/webhooks.md).

export const generateWebhookSecret = (): string => `whsec_${randomBytes(24).toString('base64')}`;

export interface SecretBox extends SealedBox {
  /**
   * A secret derived from the server secret and `material` (HMAC-SHA256 under its own HKDF key): as unpredictable as
   * a random one to anyone without API_KEY_PEPPER, and the same each time, so a rotation under an Idempotency-Key
   * run again after a crash recognises the secret it made (./handler.ts).
   */
  derive(material: string): string;
}

export function secretBox(serverSecret: string): SecretBox {
  const derivationKey = Buffer.from(hkdfSync('sha256', serverSecret, 'switchboard', 'webhook-rotation-secrets v1', 32));
  return {
    ...sealedBox(serverSecret, 'webhook-endpoint-secrets v1'),
    derive: (material) => `whsec_${createHmac('sha256', derivationKey).update(material).digest().subarray(0, 24).toString('base64')}`,
  };
}
