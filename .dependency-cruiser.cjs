/**
 * Module boundaries as layers, checked by `npm run lint` (dependency-cruiser;
 * docs/architecture.md "Layers"). Every folder of src/ is in exactly one layer, by pattern:
 *
 *   entry           src/*.ts (the composition root) and src/cli/ (command-line entry points)
 *   kernel          common/, config/, types/: shared by everything, depending on nothing else
 *   infrastructure  transport/, jetstream/, tracing/, logging/: the kernel and each other only
 *   feature         every other folder, a new one included, with no list to edit
 *
 * A feature's surface is the files at its top level (`src/<feature>/*.ts`); files in its
 * subfolders are its internals, which no other feature may import. To see a rule fail,
 * run the unit test in src/architecture.spec.ts: test/fixtures/boundaries/ holds one
 * forbidden import per rule.
 */
const KERNEL = 'common|config|types';
const INFRASTRUCTURE = 'transport|jetstream|tracing|logging';
const ENTRY = '^src/([^/]+\\.ts$|cli/)';

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
      name: 'kernel-imports-only-kernel',
      severity: 'error',
      comment: `The shared kernel (${KERNEL}) is imported by every layer and imports none of them.`,
      from: { path: `^src/(${KERNEL})/` },
      to: { path: '^src/', pathNot: `^src/(${KERNEL})/` },
    },
    {
      name: 'infrastructure-imports-no-feature',
      severity: 'error',
      comment: `Infrastructure (${INFRASTRUCTURE}) serves features and never depends on one.`,
      from: { path: `^src/(${INFRASTRUCTURE})/` },
      to: { path: '^src/', pathNot: `^src/(${KERNEL}|${INFRASTRUCTURE})/` },
    },
    {
      name: 'no-feature-internals',
      severity: 'error',
      comment:
        "A feature imports another feature's surface (its top-level files), never a file in one of its subfolders.",
      from: { path: '^src/([^/]+)/', pathNot: ENTRY },
      to: { path: '^src/([^/]+)/.+/', pathNot: `^src/($1|${KERNEL})/` },
    },
    {
      name: 'nothing-imports-entry-points',
      severity: 'error',
      comment:
        'The composition root and the CLI are where the process starts; nothing imports them.',
      from: { path: '^src/', pathNot: ENTRY },
      to: { path: ENTRY },
    },
    {
      name: 'worker-threads-load-no-zod',
      severity: 'error',
      comment:
        "The worker threads' heaps stay small: zod pulled into the inference thread (through the error class) cost about 9 core-ms per 1024x768 encode in V8's GC helpers and ONNX Runtime's pool (encode-cost benchmark). Validation belongs on the main thread.",
      from: { path: '\\.worker\\.ts$' },
      to: { path: 'node_modules/zod/', reachable: true },
    },
    {
      name: 'jetstream-clients-in-jetstream-only',
      severity: 'error',
      comment:
        'JetStream is infrastructure: only src/jetstream/ imports @nats-io/kv, obj or jetstream, types included; features reach their buckets through the handles it gives (KvBucket, ObjectBucket).',
      from: { path: '^src/', pathNot: '^src/jetstream/' },
      to: { path: '(^|node_modules/)@nats-io/(kv|obj|jetstream)(/|$)' },
    },
    {
      name: 'nats-clients-in-transport-only',
      severity: 'error',
      comment:
        'NATS is infrastructure: only src/transport/, src/jetstream/ and the SDK (src/client/) use a NATS client; elsewhere a NATS type may be named (import type).',
      from: { path: '^src/', pathNot: '^src/(transport|jetstream|client)/' },
      to: { path: '(^|node_modules/)@nats-io/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'client-imports-no-nest',
      severity: 'error',
      comment:
        'The SDK (src/client) is importable without Nest, directly or through what it imports.',
      from: { path: '^src/client/' },
      to: { path: '@nestjs/', reachable: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    exclude: { path: '\\.spec\\.ts$' },
  },
};
