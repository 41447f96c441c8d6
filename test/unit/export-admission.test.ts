import { ConfigError, loadConfig } from '../../src/config';
import { ExportAdmission, type ExportSlot, tooManyExports } from '../../src/http/export-admission';

function admit(admission: ExportAdmission, keyId: string): ExportSlot {
  const a = admission.tryAdmit(keyId);
  if (!a.admitted) throw new Error(`refused by the ${a.limit} limit`);
  return a.slot;
}

describe('export admission', () => {
  it('refuses a key over its own limit while other keys are still admitted', () => {
    const admission = new ExportAdmission({ maxConcurrent: 4, maxPerKey: 2 });
    admit(admission, 'a');
    admit(admission, 'a');
    expect(admission.tryAdmit('a')).toEqual({ admitted: false, limit: 'key' });
    admit(admission, 'b');
    expect(admission.inUse()).toBe(3);
    expect(admission.inUse('a')).toBe(2);
    expect(admission.inUse('b')).toBe(1);
  });

  it('refuses every key once the process limit is reached, whatever their own count', () => {
    const admission = new ExportAdmission({ maxConcurrent: 3, maxPerKey: 2 });
    admit(admission, 'a');
    admit(admission, 'a');
    admit(admission, 'b');
    expect(admission.tryAdmit('b')).toEqual({ admitted: false, limit: 'process' });
    expect(admission.tryAdmit('c')).toEqual({ admitted: false, limit: 'process' });
    // a refusal takes nothing
    expect(admission.inUse()).toBe(3);
    expect(admission.inUse('c')).toBe(0);
  });

  it('a released slot is given back exactly once: releasing it again changes nothing', () => {
    const admission = new ExportAdmission({ maxConcurrent: 2, maxPerKey: 2 });
    const first = admit(admission, 'a');
    const second = admit(admission, 'a');
    expect(admission.tryAdmit('b')).toEqual({ admitted: false, limit: 'process' });
    first.release();
    first.release();
    first.release();
    expect(admission.inUse()).toBe(1);
    expect(admission.inUse('a')).toBe(1);
    // the slot given back is free again, and only that one
    const third = admit(admission, 'b');
    expect(admission.tryAdmit('c')).toEqual({ admitted: false, limit: 'process' });
    second.release();
    third.release();
    second.release();
    expect(admission.inUse()).toBe(0);
    expect(admission.inUse('a')).toBe(0);
    expect(admission.inUse('b')).toBe(0);
    // every slot is usable again
    admit(admission, 'a');
    admit(admission, 'a');
    expect(admission.inUse('a')).toBe(2);
  });

  it('the 429 names the limit and says when to retry, in the export error shape', () => {
    const limits = { maxConcurrent: 4, maxPerKey: 1 };
    const key = tooManyExports('key', limits);
    expect(key.statusCode).toBe(429);
    expect(key.code).toBe('TOO_MANY_EXPORTS');
    expect(key.message).toBe('too many exports at once: this API key already has 1 export page streaming, the most allowed per key; retry in 5 seconds');
    expect(tooManyExports('process', limits).message).toBe(
      'too many exports at once: the service is already streaming 4 export pages, the most it serves at once; retry in 5 seconds',
    );
  });
});

describe('export limits configuration', () => {
  it('defaults to 4 pages at once, 2 per key', () => {
    expect(loadConfig({}).export).toEqual({ maxConcurrent: 4, maxPerKey: 2 });
  });

  it('reads EXPORT_MAX_CONCURRENT and EXPORT_MAX_PER_KEY', () => {
    expect(loadConfig({ EXPORT_MAX_CONCURRENT: '10', EXPORT_MAX_PER_KEY: '3' }).export).toEqual({ maxConcurrent: 10, maxPerKey: 3 });
  });

  it('a blank value is the default, as every variable (README)', () => {
    expect(loadConfig({ EXPORT_MAX_CONCURRENT: '', EXPORT_MAX_PER_KEY: ' ' }).export).toEqual({ maxConcurrent: 4, maxPerKey: 2 });
  });

  it.each(['0', '-1', '1.5', 'abc'])('refuses %j: a positive integer is required', (value) => {
    expect(() => loadConfig({ EXPORT_MAX_CONCURRENT: value })).toThrow(ConfigError);
    expect(() => loadConfig({ EXPORT_MAX_CONCURRENT: value })).toThrow(/EXPORT_MAX_CONCURRENT/);
    expect(() => loadConfig({ EXPORT_MAX_PER_KEY: value })).toThrow(/EXPORT_MAX_PER_KEY/);
  });
});
