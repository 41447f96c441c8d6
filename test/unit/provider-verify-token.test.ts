import { verifyTokenMatches } from '../../src/shared/provider-webhook';

describe('verifyTokenMatches (the provider handshake token, constant-time)', () => {
  it.each([
    ['the same token', 'a-token', 'a-token', true],
    ['another token of the same length', 'a-token', 'b-token', false],
    ['a prefix', 'a-token', 'a-toke', false],
    ['a longer token', 'a-token', 'a-token-and-more', false],
    ['an empty token', 'a-token', '', false],
    ['non-ASCII alike', 'tökén', 'tökén', true],
    ['non-ASCII differing', 'tökén', 'token', false],
  ])('%s', (_what, expected, given, matches) => {
    expect(verifyTokenMatches(expected, given)).toBe(matches);
  });
});
