// `npm run bench`: compiles src + bench once, then runs every bench/*.ts (or those named) one after another.
// Each prints JSON lines on stdout (ARCHITECTURE section 13); their progress goes to stderr.
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, readdirSync } from 'node:fs';

const only = process.argv.slice(2);
execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.bench.json'], { stdio: 'inherit' });
cpSync('src/adapters/postgres/migrations', '.cache/bench-build/src/adapters/postgres/migrations', { recursive: true });
// support.ts is shared code; soak.ts runs 10 minutes and has its own script (`npm run bench:soak`).
const NOT_IN_ALL = new Set(['support', 'soak']);
const benches = readdirSync('bench')
  .filter((f) => f.endsWith('.ts'))
  .map((f) => f.slice(0, -3))
  .filter((n) => (only.length === 0 ? !NOT_IN_ALL.has(n) : only.includes(n)));
let failed = 0;
for (const name of benches.sort()) {
  const r = spawnSync(process.execPath, ['--expose-gc', `.cache/bench-build/bench/${name}.js`], { stdio: ['ignore', 'inherit', 'inherit'], timeout: 6 * 60_000 });
  if (r.status !== 0) {
    failed++;
    process.stderr.write(`bench ${name} failed (exit ${r.status}${r.signal ? `, ${r.signal}` : ''})\n`);
  }
}
process.exit(failed ? 1 : 0);
