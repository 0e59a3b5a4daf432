// Nest 12 ships ESM only; @swc/jest compiles both our TS and @nestjs's ESM to CommonJS.
const swc = JSON.parse(require('node:fs').readFileSync(`${__dirname}/.swcrc`, 'utf8'));
const transform = { '^.+\\.(t|j|mj)s$': ['@swc/jest', { ...swc, swcrc: false }] };
// ESM-only packages Jest must compile to CommonJS: Nest 12, and the wasm audio decoders.
const transformIgnorePatterns = [
  '/node_modules/(?!(@nestjs|@wasm-audio-decoders|codec-parser|mpg123-decoder|@eshaz|simple-yenc)/)',
];
const common = {
  transform,
  transformIgnorePatterns,
  testEnvironment: 'node',
  moduleFileExtensions: ['ts', 'js', 'mjs', 'json'],
};

module.exports = {
  // A global option: Jest ignores testTimeout inside `projects`.
  testTimeout: 60000,
  projects: [
    {
      ...common,
      displayName: 'unit',
      testMatch: ['<rootDir>/src/**/*.spec.ts'],
      setupFiles: ['<rootDir>/test/support/unit-setup.ts'],
    },
    {
      ...common,
      displayName: 'e2e',
      testMatch: ['<rootDir>/test/**/*.e2e-spec.ts'],
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      setupFilesAfterEnv: ['<rootDir>/test/support/after-file.ts'],
      globalTeardown: '<rootDir>/test/support/global-teardown.ts',
    },
  ],
};
