// A company's time zone as the IANA database spells it (docs/provisioning.md, "Time zones"). Node's Intl takes a
// name in any letter case, but its resolved name is ICU's canonical one, not the name given (America/Argentina/
// Buenos_Aires comes back America/Buenos_Aires, Europe/Kyiv Europe/Kiev): so only the letter case is mended, word by
// word, the name itself is kept.

/**
 * Words of Area/Location names spelled otherwise than capitalized (Kolkata): in capitals, with inner capitals or in
 * lower case. Most are links from the database's `backward` file, which Node's own list of zones leaves out.
 */
const SPELLED_APART = [
  'Etc', 'GMT', 'UTC', 'UCT', 'US', 'IN', 'ACT', 'LHI', 'NSW',
  'SystemV', 'ComodRivadavia', 'DeNoronha', 'EasterIsland', 'BajaNorte', 'BajaSur', 'DumontDUrville', 'McMurdo', 'au', 'es', 'of',
];

let spelled: Map<string, string> | undefined;

/** lower case → IANA spelling, of every word of Node's zone names and of the words above */
function knownWords(): Map<string, string> {
  if (!spelled) {
    spelled = new Map();
    for (const name of [...Intl.supportedValuesOf('timeZone'), ...SPELLED_APART]) {
      for (const word of name.split(/[/_-]/)) spelled.set(word.toLowerCase(), word);
    }
  }
  return spelled;
}

/** A word of a zone name in IANA's letter case: a known word's own, one with a digit in capitals (GMT+3), else capitalized. */
function spellWord(word: string): string {
  const lower = word.toLowerCase();
  const known = knownWords().get(lower);
  if (known !== undefined) return known;
  if (/\d/.test(lower)) return lower.toUpperCase();
  return lower.charAt(0).toUpperCase() + lower.slice(1);
}

const isZone = (name: string): boolean => {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    return false;
  }
};

/**
 * The IANA spelling of a time zone name given in any letter case (`america/argentina/buenos_aires` →
 * `America/Argentina/Buenos_Aires`), or undefined when it is no zone: an Area/Location name, or `UTC`.
 */
export function ianaZoneSpelling(name: string): string | undefined {
  const spelling = name.replace(/[^/_-]+/g, spellWord);
  if (!spelling.includes('/') && spelling !== 'UTC') return undefined;
  return isZone(spelling) ? spelling : undefined;
}
