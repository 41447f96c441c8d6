import { ApiKeyHashes } from '../../src/http/api-key-hashes';
import { hashApiKey } from '../../src/shared/api-key';

jest.mock('../../src/shared/api-key', () => {
  const actual = jest.requireActual('../../src/shared/api-key');
  return { ...actual, hashApiKey: jest.fn(actual.hashApiKey) };
});
const hmac = hashApiKey as jest.MockedFunction<typeof hashApiKey>;

describe('API key hashes of known keys', () => {
  const pepper = 'hashes-pepper';
  const stored = (...clear: string[]) => {
    const hashes = new Set(clear.map((c) => jest.requireActual('../../src/shared/api-key').hashApiKey(pepper, c)));
    const asked: string[] = [];
    const find = async (hash: string) => (asked.push(hash), hashes.has(hash) ? { hash } : undefined);
    return { find, asked };
  };
  beforeEach(() => hmac.mockClear());

  it('hashes an unknown key with the HMAC every time, and a key that matched from memory', async () => {
    const hashes = new ApiKeyHashes(pepper);
    const { find, asked } = stored('sbk_known0123456789');
    expect(await hashes.find('sbk_unknown0123456789', find)).toBeUndefined();
    expect(await hashes.find('sbk_unknown0123456789', find)).toBeUndefined();
    expect(hmac).toHaveBeenCalledTimes(2); // a made-up key is not remembered
    expect(await hashes.find('sbk_known0123456789', find)).toEqual({ hash: hashApiKey(pepper, 'sbk_known0123456789') });
    hmac.mockClear();
    expect(await hashes.find('sbk_known0123456789', find)).toEqual({ hash: asked[2] });
    expect(asked[3]).toBe(asked[2]);
    expect(hmac).not.toHaveBeenCalled();
  });

  it('keeps at most its bound, dropping the least recently used first', async () => {
    const hashes = new ApiKeyHashes(pepper, 2);
    const { find } = stored('a', 'b', 'c');
    for (const key of ['a', 'b', 'c']) await hashes.find(key, find);
    hmac.mockClear();
    await hashes.find('b', find);
    await hashes.find('c', find);
    expect(hmac).not.toHaveBeenCalled();
    await hashes.find('a', find);
    expect(hmac).toHaveBeenCalledTimes(1);
    expect(hmac).toHaveBeenCalledWith(pepper, 'a');
  });
});
