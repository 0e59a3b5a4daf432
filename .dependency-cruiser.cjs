/**
 * Module boundaries, checked by `npm run lint` (dependency-cruiser; README "Architecture").
 * To see a rule fail, add a forbidden import and run `npm run lint:deps`, e.g. in
 * src/transport/subjects.ts: `import '../encoder/encoder.module';` → "transport-imports-no-feature".
 * test/fixtures/forbidden-import/ holds such an import, and a unit test checks that it fails.
 */
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'No import cycles, type-only imports included.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'transport-imports-no-feature',
      severity: 'error',
      comment:
        'transport/ is infrastructure (connection, Nest server, serializers, subjects): features depend on it, never the reverse.',
      from: { path: '^src/transport/' },
      to: {
        path: '^src/(encoder|delivery|requests|profiling|meta-registry|admin|health|metrics|transfer|cli|client|dispatch|routing)/',
      },
    },
    {
      name: 'client-imports-no-nest',
      severity: 'error',
      comment:
        'The SDK (src/client) is importable without Nest, directly or through what it imports.',
      from: { path: '^src/client/' },
      to: { path: '@nestjs/', reachable: true },
    },
    {
      name: 'client-imports-only-plain-modules',
      severity: 'error',
      comment: 'The SDK must not pull in service modules (which import Nest).',
      from: { path: '^src/client/' },
      to: {
        path: '^src/(encoder|delivery|requests|profiling|admin|health|metrics|transport|transfer|cli)/',
        pathNot: '^src/transport/subjects\\.ts$',
      },
    },
    {
      name: 'only-cli-imports-model-generator',
      severity: 'error',
      comment:
        'The reference-model generator (cli/models/) is a dev tool: the service reads the contract from encoder/pipeline/model-contract.ts.',
      from: {
        path: '^src/',
        pathNot: '^src/cli/',
      },
      to: { path: '^src/cli/models/' },
    },
    {
      name: 'common-imports-no-feature',
      severity: 'error',
      comment: 'common/ and config/ are shared by every feature and depend on none.',
      from: { path: '^src/(common|config)/' },
      to: {
        path: '^src/(encoder|delivery|requests|profiling|meta-registry|admin|health|metrics|transport|transfer|cli|client|dispatch|routing)/',
      },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    exclude: { path: '\\.spec\\.ts$' },
  },
};
