import { validateFixture } from '../../src/commands/provisioning/fixture';
import { buildDemoFixture } from '../../src/commands/provisioning/demo-fixture';
import { exampleFixture } from '../support/provisioning';

// Review 23: a schedule or a holiday's custom hours from a time to the same time (an empty range) were accepted and
// served by /business-hours/ and /holidays/ as opening hours of no length. The contract (shared/contracts/fixture.md)
// gives no meaning to such a range; it is refused naming its path (docs/provisioning.md, "Decisions").

const problems = (doc: unknown): string[] => {
  const result = validateFixture(doc, 'sbk');
  return result.ok ? [] : result.issues.map((i) => `${i.path}: ${i.message}`);
};

describe('review 23: empty opening-hour ranges in the fixture', () => {
  it('the example and the demo fixture are valid as they are', () => {
    expect(problems(exampleFixture({ keepContacts: true }))).toEqual([]);
    expect(problems(buildDemoFixture({ key: 'sbk_demo0123456789abcdef', now: new Date('2026-11-28T00:00:00Z') }))).toEqual([]);
  });

  it('a weekly schedule whose startTime equals its finishAt is refused at its finishAt', () => {
    const doc = exampleFixture();
    doc.companies[0].branches[0].schedules[0].startTime = '09:00:00';
    doc.companies[0].branches[0].schedules[0].finishAt = '09:00:00';
    expect(problems(doc)).toEqual([
      'companies[0].branches[0].schedules[0].finishAt: must differ from startTime (both 09:00:00: the range is empty); a whole day is 00:00:00 to 23:59:59',
    ]);
  });

  it('a specific-date schedule and an inactive one alike', () => {
    const doc = exampleFixture();
    const [weekly, specific] = doc.companies[0].branches[0].schedules;
    specific.finishAt = specific.startTime;
    weekly.isActive = false;
    weekly.finishAt = weekly.startTime = '00:00:00';
    expect(problems(doc)).toEqual([
      'companies[0].branches[0].schedules[0].finishAt: must differ from startTime (both 00:00:00: the range is empty); a whole day is 00:00:00 to 23:59:59',
      `companies[0].branches[0].schedules[1].finishAt: must differ from startTime (both ${specific.startTime}: the range is empty); a whole day is 00:00:00 to 23:59:59`,
    ]);
  });

  it('a holiday with custom hours whose startTime equals its finishAt is refused at its finishAt', () => {
    const doc = exampleFixture();
    const hi = doc.companies[0].holidays.findIndex((h: { hasCustomHours?: boolean }) => h.hasCustomHours);
    doc.companies[0].holidays[hi].finishAt = doc.companies[0].holidays[hi].startTime;
    expect(problems(doc)).toEqual([
      `companies[0].holidays[${hi}].finishAt: must differ from startTime (both ${doc.companies[0].holidays[hi].startTime}: the range is empty); a day closed throughout has hasCustomHours false`,
    ]);
  });

  // Report only (left accepted on purpose): the contract says nothing against them, and both can be meant.
  it('overlapping weekly schedules on one branch and a range past midnight are still accepted', () => {
    const doc = exampleFixture();
    const schedules = doc.companies[0].branches[0].schedules;
    schedules.push({ ...schedules[0], id: 900, startTime: '12:00:00', finishAt: '20:00:00', days: ['MONDAY'] });
    schedules.push({ ...schedules[0], id: 901, startTime: '22:00:00', finishAt: '02:00:00', days: ['SATURDAY'] });
    expect(problems(doc)).toEqual([]);
  });
});
