/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  transform: {
    '^.+\\.ts$': ['@swc/jest'],
    // a few dependencies ship ESM only (cookie via fastify's inject, content-disposition via @fastify/static): swc turns them into CommonJS for jest
    '^.+\\.m?js$': ['@swc/jest', { module: { type: 'commonjs' }, jsc: { parser: { syntax: 'ecmascript' }, target: 'es2022' } }],
  },
  transformIgnorePatterns: ['/node_modules/(?!(cookie|content-disposition)/)'],
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  globalSetup: '<rootDir>/test/support/global-setup.mjs',
  globalTeardown: '<rootDir>/test/support/global-teardown.mjs',
  maxWorkers: 2,
  testTimeout: 60000,
  reporters: ['default', '<rootDir>/test/support/summary-reporter.cjs'],
};
