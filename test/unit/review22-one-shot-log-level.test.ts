import { oneShotConfig } from '../../src/cli/runtime';

// Found in review 22 (docs against code): a blank `LOG_LEVEL=` (an env file's empty line) replaced the one-shot
// commands' `warn` and was then dropped as blank, so `keys list` or `events export` logged at `info` on stderr.

describe('a one-shot command\'s log level', () => {
  it.each([
    ['unset', undefined, 'warn'],
    ['blank', '', 'warn'],
    ['spaces', '  ', 'warn'],
    ['set', 'debug', 'debug'],
  ])('LOG_LEVEL %s: %s', (_, value, level) => {
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH };
    if (value !== undefined) env.LOG_LEVEL = value;
    expect(oneShotConfig(env).logLevel).toBe(level);
  });
});
