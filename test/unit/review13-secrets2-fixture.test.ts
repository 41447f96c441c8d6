import { FixtureError, validateFixture } from '../../src/commands/provisioning/fixture';

// Review 13 (docs/reliability.md, "What is logged (2026-11-28)"): `seed` prints a fixture's problems, and a
// duplicated API key's problem quoted the key in clear. It now names where the key is, never the key.

const KEY = 'sbk_dupl1cated-secret-0123456789';
const GLOBAL = 'sbk_global_another-secret-987654321';

describe('a duplicated API key in a fixture', () => {
  it('is named by its paths, without its value (company and global keys)', () => {
    const r = validateFixture({
      companies: [
        { id: 1, name: 'One', timezone: 'UTC', apiKeys: [{ name: 'a', key: KEY }, { name: 'b', key: KEY }] },
        { id: 2, name: 'Two', timezone: 'UTC', apiKeys: [{ name: 'c', key: KEY }] },
      ],
      globalKeys: [{ name: 'g1', key: GLOBAL }, { name: 'g2', key: GLOBAL }],
    }, 'sbk');
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.issues).toEqual([
      { path: 'companies[0].apiKeys[1].key', message: 'duplicate API key (the same key as at companies[0].apiKeys[0].key)' },
      { path: 'companies[1].apiKeys[0].key', message: 'duplicate API key (the same key as at companies[0].apiKeys[0].key)' },
      { path: 'globalKeys[1].key', message: 'duplicate API key (the same key as at globalKeys[0].key)' },
    ]);
    // what `seed` prints
    const printed = new FixtureError(r.issues).message;
    expect(printed).not.toContain(KEY);
    expect(printed).not.toContain(GLOBAL);
    expect(printed).not.toMatch(/dupl1cated|another-secret/);
  });

  it('other duplicates still quote their value (ids are not secret)', () => {
    const r = validateFixture({
      companies: [{ id: 7, name: 'A', timezone: 'UTC' }, { id: 7, name: 'B', timezone: 'UTC' }],
    }, 'sbk');
    expect(r).toEqual({ ok: false, issues: [{ path: 'companies[1].id', message: 'duplicate company id 7 (first at companies[0].id)' }] });
  });
});
