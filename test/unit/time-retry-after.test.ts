import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

// Time review (2026-11-28, docs/business.md "Time and time zones"): a `Retry-After` HTTP-date (a client's webhook
// endpoint's, the provider's) was read with Date.parse, which takes a date without a zone in the process's own time
// zone. RFC 9110's asctime form names no zone and means GMT: in a process in Pacific/Kiritimati (UTC+14) a wait of
// 28 minutes became none, in America/St_Johns 3 h 58 min. Date.parse also took forms HTTP does not have. Now the three
// HTTP-date forms are read as GMT, in every process time zone, and anything else is no Retry-After.
// The source runs in a child process with TZ set (jest's own process.env.TZ does not move its workers' zone).

const SOURCE = join(__dirname, '../../src/shared/retry-after.ts');
const NOW = '2026-10-21T07:00:00.000Z';
const HEADERS = [
  'Wed, 21 Oct 2026 07:28:00 GMT', // IMF-fixdate
  'Wednesday, 21-Oct-26 07:28:00 GMT', // RFC 850
  'Wed Oct 21 07:28:00 2026', // asctime: no zone, GMT
  'Wed Oct  1 07:28:00 2026', // asctime, a one-digit day: in the past
  'wed, 21 oct 2026 07:28:00 gmt',
  '90',
  'Wed, 21 Oct 2026 07:28:00', // no zone: not an HTTP-date
  '2026-10-21T07:28:00',
  '2026-10-21T07:28:00Z',
  'Wed, 21 Oct 2026 07:28:00 PST',
  'Fri, 30 Feb 2026 07:28:00 GMT',
  'Wed, 21 Oct 2026 24:00:00 GMT',
  'soon',
];

function waitsIn(tz: string): Array<number | null> {
  const script = `
    const { transformFileSync } = require('@swc/core');
    const { code } = transformFileSync(${JSON.stringify(SOURCE)}, { module: { type: 'commonjs' }, jsc: { parser: { syntax: 'typescript' }, target: 'es2022' } });
    const m = { exports: {} };
    new Function('module', 'exports', 'require', code)(m, m.exports, require);
    const now = new Date(${JSON.stringify(NOW)});
    const headers = ${JSON.stringify(HEADERS)};
    process.stdout.write(JSON.stringify({ local: new Date(2026, 9, 21).toISOString(), waits: headers.map((h) => m.exports.retryAfterMs(h, now) ?? null) }));
  `;
  const r = spawnSync(process.execPath, ['-e', script], { env: { ...process.env, TZ: tz }, encoding: 'utf8', cwd: join(__dirname, '../..') });
  if (r.status !== 0) throw new Error(r.stderr);
  const out = JSON.parse(r.stdout) as { local: string; waits: Array<number | null> };
  // the child's zone is the one asked for
  expect([tz, out.local]).toEqual([tz, { UTC: '2026-10-21T00:00:00.000Z', 'Pacific/Kiritimati': '2026-10-20T10:00:00.000Z', 'America/St_Johns': '2026-10-21T02:30:00.000Z', 'Asia/Kathmandu': '2026-10-20T18:15:00.000Z' }[tz]]);
  return out.waits;
}

const MIN = 60_000;

describe('Retry-After: the three HTTP-date forms are GMT in every process time zone', () => {
  it.each(['UTC', 'Pacific/Kiritimati', 'America/St_Johns', 'Asia/Kathmandu'])('%s', (tz) => {
    expect(waitsIn(tz)).toEqual([28 * MIN, 28 * MIN, 28 * MIN, 0, 28 * MIN, 90_000, null, null, null, null, null, null, null]);
  });
});
