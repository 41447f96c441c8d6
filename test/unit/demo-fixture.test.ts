import { blackFridayOf, buildDemoFixture } from '../../src/commands/provisioning/demo-fixture';

// Found in review 22: the demo's "Black Friday extended hours" were on November 27th of every year, a Friday in
// 2026 only (a Saturday in 2027, a Monday in 2028).

describe('the demo fixture', () => {
  it.each([
    [2025, '2025-11-28'], [2026, '2026-11-27'], [2027, '2027-11-26'], [2028, '2028-11-24'], [2029, '2029-11-23'], [2030, '2030-11-29'],
  ])('Black Friday of %i is %s, a Friday', (year, day) => {
    expect(blackFridayOf(year)).toBe(day);
    expect(new Date(`${day}T00:00:00Z`).getUTCDay()).toBe(5);
  });

  it('puts the extended hours on the Black Friday of the year it is built in', () => {
    const fixture = buildDemoFixture({ key: 'k', now: new Date('2027-03-01T12:00:00Z') });
    const dates = JSON.stringify(fixture).match(/"specificDate":"[^"]+"/g);
    expect(dates).toEqual(['"specificDate":"2027-11-26"']);
  });
});
