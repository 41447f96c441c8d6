import { ApiKeyHashes } from '../../src/http/api-key-hashes';
import { hashApiKey } from '../../src/shared/api-key';

describe('API key hashes of known keys', () => {
  const pepper = 'hashes-pepper';

  it('hashes an unknown key with the HMAC every time, and a remembered one from memory', () => {
    const hashes = new ApiKeyHashes(pepper);
    expect(hashes.hashOf('sbk_unknown0123456789')).toBe(hashApiKey(pepper, 'sbk_unknown0123456789'));
    // what it answers for a remembered key comes from memory, not from hashing again
    hashes.remember('sbk_known0123456789', 'remembered-hash');
    expect(hashes.hashOf('sbk_known0123456789')).toBe('remembered-hash');
    expect(hashes.hashOf('sbk_unknown0123456789')).toBe(hashApiKey(pepper, 'sbk_unknown0123456789'));
  });

  it('keeps at most its bound, dropping the oldest first', () => {
    const hashes = new ApiKeyHashes(pepper, 2);
    hashes.remember('a', 'hash-a');
    hashes.remember('b', 'hash-b');
    hashes.remember('c', 'hash-c');
    expect(hashes.hashOf('a')).toBe(hashApiKey(pepper, 'a'));
    expect(hashes.hashOf('b')).toBe('hash-b');
    expect(hashes.hashOf('c')).toBe('hash-c');
  });
});
