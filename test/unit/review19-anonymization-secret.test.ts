import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { anonymizationSecretWeakness } from '../../src/main';

// Privacy review 19 (docs/privacy.md): the export's ids are keyed HMACs of real ids shown beside some of them, so a
// guessable ANONYMIZATION_SECRET is confirmed offline and every customer's id reversed by trying numbers. A start with
// the compose file's published default says so in one warn line (src/main.ts, startRuntime).

describe('review 19: a weak ANONYMIZATION_SECRET is named at start', () => {
  it("docker-compose.yml's default is named weak; 32 random bytes and the embedded default are not", () => {
    const compose = readFileSync(join(__dirname, '..', '..', 'docker-compose.yml'), 'utf8');
    const composeDefault = /ANONYMIZATION_SECRET: \$\{ANONYMIZATION_SECRET:-([^}]+)\}/.exec(compose)?.[1];
    expect(composeDefault).toBeDefined();
    expect(anonymizationSecretWeakness(composeDefault!)).toBe("it is docker-compose.yml's published local-only default");
    expect(anonymizationSecretWeakness(randomBytes(32).toString('base64'))).toBeUndefined();
    expect(anonymizationSecretWeakness(randomBytes(32).toString('hex'))).toBeUndefined(); // resolveSecrets' own
  });
});
