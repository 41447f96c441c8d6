import { randomBytes } from 'node:crypto';
import { type SealedBox, sealedBox } from '../../shared/sealed-box';

// Signing secrets: `whsec_` + base64 of 24 random bytes (Standard Webhooks). In events and read models only as
// AES-256-GCM ciphertext under a key derived (HKDF-SHA256) from the server's API_KEY_PEPPER (../../shared/sealed-box.ts),
// so the event log that analytics replays never holds a usable secret (docs/webhooks.md).

export const generateWebhookSecret = (): string => `whsec_${randomBytes(24).toString('base64')}`;

export type SecretBox = SealedBox;

export const secretBox = (serverSecret: string): SecretBox => sealedBox(serverSecret, 'webhook-endpoint-secrets v1');
