import { readFileSync } from 'node:fs';
import { join } from 'node:path';

// Test-only TLS material (test/fixtures/tls/README.md): a test CA, a server certificate it signed for
// `hooks.example.test` and 127.0.0.1, and a self-signed one for the same names.

const read = (name: string) => readFileSync(join(__dirname, '../fixtures/tls', name), 'utf8');

export const TEST_CA_FILE = join(__dirname, '../fixtures/tls/ca.pem');
export const TEST_CA = read('ca.pem');
/** signed by the test CA, for hooks.example.test and 127.0.0.1 */
export const HOOKS_TLS = { cert: read('hooks.pem'), key: read('hooks.key') };
/** self-signed, for the same names */
export const UNTRUSTED_TLS = { cert: read('untrusted.pem'), key: read('untrusted.key') };
