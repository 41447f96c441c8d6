import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

// Values kept at rest only as AES-256-GCM ciphertext (base64 of iv, tag, data) under a key derived (HKDF-SHA256)
// from a server secret and a purpose, so each purpose has its own key: webhook signing secrets in events and read
// models (docs/webhooks.md), the answers the Idempotency-Key records keep for replays (docs/idempotency.md).

export interface SealedBox {
  seal(plain: string): string;
  open(sealed: string): string;
}

export function sealedBox(serverSecret: string, purpose: string): SealedBox {
  const key = Buffer.from(hkdfSync('sha256', serverSecret, 'switchboard', purpose, 32));
  return {
    seal(plain) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      const data = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
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
