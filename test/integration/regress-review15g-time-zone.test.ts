import { ianaZoneSpelling } from '../../src/commands/provisioning/time-zone';

// Regression review 15g of 0564e67: a zone name given as the IANA database spells it is kept as given. Node's ICU
// accepts the legacy SystemV/* names (left out of its list of zones), whose Area was mended to `Systemv`, a spelling
// no case-sensitive zone library knows (before 0564e67 the name was stored as written).
describe('regress review 15g: a time zone spelled as IANA spells it is kept', () => {
  it.each(['SystemV/AST4', 'SystemV/AST4ADT', 'SystemV/EST5EDT', 'SystemV/YST9'])('%s, in any letter case', (zone) => {
    expect([ianaZoneSpelling(zone), ianaZoneSpelling(zone.toLowerCase()), ianaZoneSpelling(zone.toUpperCase())]).toEqual([zone, zone, zone]);
  });
});
