import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

// The layering of ARCHITECTURE section 2 (issue #17), checked with dependency-cruiser and the rules in
// .dependency-cruiser.cjs: inner layers never import outer ones, projections never import commands, no circles.

const ROOT = resolve(__dirname, '../..');
const CLI = join(ROOT, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');
const CONFIG = join(ROOT, '.dependency-cruiser.cjs');

interface Violation { rule: { name: string }; from: string; to: string; cycle?: Array<{ name: string }> }

function violations(cwd: string): Violation[] {
  const out = execFileSync(process.execPath, [CLI, 'src', '--config', CONFIG, '--output-type', 'json'], { cwd, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  return (JSON.parse(out) as { summary: { violations: Violation[] } }).summary.violations;
}
const describeViolation = (v: Violation) =>
  `${v.rule.name}: ${v.from} -> ${v.to}${v.cycle ? ` (circle: ${v.cycle.map((c) => c.name).join(' -> ')})` : ''}`;

describe('layering (dependency-cruiser)', () => {
  it('src has no violation of the layering rules', () => {
    expect(violations(ROOT).map(describeViolation)).toEqual([]);
  }, 60_000);

  describe('the rules themselves', () => {
    let dir: string;
    beforeAll(() => {
      dir = mkdtempSync(join(tmpdir(), 'layering-'));
      const files: Record<string, string> = {
        'tsconfig.json': JSON.stringify({ compilerOptions: { module: 'node16', moduleResolution: 'node16', strict: true }, include: ['src/**/*.ts'] }),
        'src/workers/runner.ts': 'export const runner = 1;\n',
        'src/commands/a.ts': "import { runner } from '../workers/runner';\nimport { b } from './b';\nexport const a = runner + b;\n",
        'src/commands/b.ts': "import { a } from './a';\nexport const b = () => a;\n",
        'src/projections/p.ts': "import type { a } from '../commands/a';\nexport type P = typeof a;\n",
        'src/events/e.ts': 'export const e = 1;\n',
        'src/projections/q.ts': "import { e } from '../events/e';\nexport const q = e;\n",
      };
      for (const [path, text] of Object.entries(files)) {
        mkdirSync(dirname(join(dir, path)), { recursive: true });
        writeFileSync(join(dir, path), text);
      }
    });
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    it('name a command importing a worker, a projection importing a command, and a circle; allow the rest', () => {
      const found = violations(dir).map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`).sort();
      expect(found).toEqual([
        'inner-imports-outer: src/commands/a.ts -> src/workers/runner.ts',
        'no-circular: src/commands/a.ts -> src/commands/b.ts', // a circle is named once, by one of its edges
        'projection-imports-command: src/projections/p.ts -> src/commands/a.ts',
      ]);
    }, 60_000);
  });
});
