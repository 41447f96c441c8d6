import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

// Signing secrets: `whsec_` + base64 of 24 random bytes (Standard Webhooks). In events and read models only as
// AES-256-GCM ciphertext under a key derived (HKDF-SHA256) from the server's API_KEY_PEPPER, so the event log that
// analytics replays never holds a usable secret (docs/webhooks.md).

export const generateWebhookSecret = (): string => `whsec_${randomBytes(24).toString('base64')}`;

export interface SecretBox {
  seal(secret: string): string;
  open(sealed: string): string;
}

export function secretBox(serverSecret: string): SecretBox {
  const key = Buffer.from(hkdfSync('sha256', serverSecret, 'switchboard', 'webhook-endpoint-secrets v1', 32));
  return {
    seal(secret) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      const data = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
      return Buffer.concat([iv, cipher.getAuthTag(), data]).toString('base64');
    },
    open(sealed) {
      const raw = Buffer.from(sealed, 'base64');
      const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
      decipher.setAuthTag(raw.subarray(12, 28));
      return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
    },
  };
}
