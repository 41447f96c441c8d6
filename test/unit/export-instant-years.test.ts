import { parseInstant } from '../../src/http/routes/export';

// The export's `from`/`to` reader takes every year as written (Date.UTC alone reads 0-99 as 1900-1999). Whether
// the year is storable is the route's check (test/api/input-edge-cases.test.ts).

describe('parseInstant: four-digit years as written', () => {
  it.each([
    ['0099-01-01', '0099-01-01T00:00:00.000Z'],
    ['0001-01-01T00:00:00Z', '0001-01-01T00:00:00.000Z'],
    ['0004-02-29T12:30:00+02:00', '0004-02-29T10:30:00.000Z'],
    ['0099-12-31T23:00:00-05:00', '0100-01-01T04:00:00.000Z'],
  ])('parses %s as %s', (input, iso) => {
    expect(parseInstant(input)?.toISOString()).toBe(iso);
  });
});
