import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestApp } from '../support/services';

// The OpenAPI document is what clients generate their SDKs from: it must be a valid OpenAPI 3.0 document, checked
// against the specification's own JSON schema with a maintained validator (@seriousme/openapi-schema-validator).
// The validator is ESM-only: it runs in a child Node process (jest runs the tests as CommonJS).

const VALIDATE = `
import { Validator } from '@seriousme/openapi-schema-validator';
import { readFileSync } from 'node:fs';
const result = await new Validator().validate(JSON.parse(readFileSync(process.argv[1], 'utf8')));
process.stdout.write(JSON.stringify(result));
`;

function validate(doc: unknown): { valid: boolean; errors?: unknown } {
  const dir = mkdtempSync(join(tmpdir(), 'switchboard-openapi-'));
  try {
    const file = join(dir, 'openapi.json');
    writeFileSync(file, JSON.stringify(doc));
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', VALIDATE, file], { cwd: join(__dirname, '../..'), encoding: 'utf8' });
    if (run.status !== 0) throw new Error(`the validator failed: ${run.stderr}`);
    return JSON.parse(run.stdout);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('GET /openapi.json', () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  let doc: { openapi: string; paths: Record<string, unknown> };
  beforeAll(async () => {
    t = await createTestApp();
    doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
  });
  afterAll(async () => t?.close());

  it('is a valid OpenAPI 3.0 document', () => {
    expect(doc.openapi).toMatch(/^3\.0\./);
    expect(validate(doc)).toEqual({ valid: true });
  });

  it('the check finds a broken document (a response without its description)', () => {
    const broken = structuredClone(doc) as { paths: Record<string, Record<string, { responses: Record<string, { description?: string }> }>> };
    delete broken.paths['/api/v1/business-accounts/'].get.responses['200'].description;
    expect(validate(broken).valid).toBe(false);
  });
});
