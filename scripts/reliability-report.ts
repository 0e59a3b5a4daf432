/**
 * docs/reliability.md from one `npm run test:reliability` run: jest's JSON results (every
 * suite: tests passed and failed, time) and the fuzz and soak summaries the suites wrote.
 * usage: node dist-bench/scripts/reliability-report.js <results-dir> <commit>
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { FaultOutcome } from '../test/support/fault-report';

interface JestResults {
  numPassedTests: number;
  numFailedTests: number;
  testResults: {
    name: string;
    status: string;
    startTime: number;
    endTime: number;
    assertionResults: { title: string; status: string }[];
  }[];
}

/** What each suite injects or tries, for the table. */
const WHAT: Record<string, string> = {
  'fuzz.e2e-spec.ts': 'random and mutated-valid bodies on every NATS subject and HTTP route',
  'hardening-media.e2e-spec.ts':
    'decompression bombs, huge dimensions, GIF frame floods, lying WAV headers, path escapes, URL tricks',
  'hardening-memory.e2e-spec.ts': 'amplifying inputs, with the peak RSS they may cost',
  'hardening-inputs.e2e-spec.ts': 'oversize and malformed requests on both transports',
  'overload.e2e-spec.ts':
    'a 20,000-call burst, with stepping out on and off: every call answered (ok or 503 overloaded), none left to time out; a lone instance never steps out, and in a two-instance cluster the anchor stays in the queue group (0 "no responders")',
  'registry-burst.e2e-spec.ts':
    '2,000 and 10,000 concurrent wait_metadata calls then their publishes on one instance at its defaults: every wait its own value, nothing shed, no step-out',
  'call-ledger.e2e-spec.ts':
    'M3/M4/M11/M13: 900 KiB call ids, 12,000 far-deadline calls beside a long wait, a reused id on another dp_type, a malformed tenant subject',
  'roster-poison.e2e-spec.ts':
    'M2/M12: null, non-JSON, forged and NaN heartbeats in the roster bucket: still serving, desired_replicas unmoved',
  'work-budget-leak.e2e-spec.ts':
    'M1: a bad item beside 19 MiB files and downloads: the working-memory budget back to zero, the next encode served',
  'scaling-inputs.e2e-spec.ts': 'M5: a 40,000-item request answered 413 moves no autoscaling input',
  'run-ends-on-failure.e2e-spec.ts':
    'a test that fails on purpose with a service and an app still running: the run reports it and ends, nothing left running',
  'takeover.e2e-spec.ts':
    'M7: calls for handed-off embeddings reaching two instances at once: one takeover each, nothing delivered after the release; an owner restarted under its instance id answers embedding_lost on the forwarded route too',
  'buckets-deleted.e2e-spec.ts':
    'M14: the roster, claims and both object store buckets deleted under a running instance: each recreated, counted in /health/ready, the cache writing again',
  'http-body-budget.e2e-spec.ts':
    'M10: unfinished HTTP bodies: charged to the working-memory budget as they arrive, 503 memory_busy past it, 408 body_timeout, every byte given back',
  'soak.e2e-spec.ts':
    'long runs of encodes and waits; counts back to zero, heap ≤ 1.15× and RSS ≤ 1.25× of the warmed baseline',
  'shutdown.e2e-spec.ts': 'SIGTERM under load',
  'worker-shutdown.e2e-spec.ts': 'DP supervisor and worker shutdown',
  'registry-jetstream.e2e-spec.ts': 'the JetStream store through NATS restarts and outages',
  'nats-restart.e2e-spec.ts': 'nats-server SIGKILLed and restarted under 32 calls in flight',
  'multi-instance.e2e-spec.ts': 'a NATS cluster node lost under two instances',
  'dp-workers.e2e-spec.ts': 'DP worker SIGKILL mid-call, respawn, lost embeddings',
  'cache-cluster.e2e-spec.ts': 'cache owner killed or hung mid-encode',
  'delivery.e2e-spec.ts': 'receivers that never ack, close mid-frame, or read slowly',
  'registry-shared.e2e-spec.ts': 'owner loss and restart under the same instance id',
  'nats-auth.e2e-spec.ts':
    'identities refused what their role may not do, over TLS; N4: a receiver refused every inbox but its own',
  'destinations.e2e-spec.ts': 'pushes to endpoints outside EPD_ALLOWED_DESTINATIONS',
  'restart-honesty.e2e-spec.ts':
    'whole-process SIGKILL and restart on the memory store (single and DP): lost embeddings named',
  'fused-retry.e2e-spec.ts': 'a fused forward that fails: each request retried alone, no wedge',
  'staging-slab.e2e-spec.ts':
    'staged embeddings in the staging slab: a slot outlives its released request while a socket still writes from it (the receiver gets its own values), and every slot comes back',
  'model-input-parcel.e2e-spec.ts':
    'model inputs passed around the main thread: no main-thread memory, exact values, parcels freed on every refusal',
  'pool-after-close.e2e-spec.ts':
    'a task after the worker pools closed for shutdown: refused 503, no thread started again',
  'worker-load-abort.e2e-spec.ts': 'worker pools closed while their threads load, 120 times',
  'zmq-socket-exhaustion.e2e-spec.ts':
    'N1: sends to 1,100 unreachable ZMQ ports, then a new real receiver: no socket or descriptor left behind',
  'kv-bucket-deleted.e2e-spec.ts':
    'N8: the shared registry bucket deleted under a running service: recreated, serving again',
  'memory-budget.e2e-spec.ts':
    'N2: 16 concurrent 13-image encodes of ~600 B each, with the forward slower than preprocessing: the peak held to the working-memory and staging budgets, every budget back to zero',
  'tenants.e2e-spec.ts':
    "N3/N9: tenant beta's receiver releases, tombstones and redirects tenant alpha's req_ids, and plants trusted hashes in alpha's namespace: alpha unaffected, 0 bytes to beta",
  'zmq-handshake.e2e-spec.ts':
    'N6: a ZMQ send to a listener that never spoke ZMTP: an error naming it, no frame sent, not acked',
  'receipts.e2e-spec.ts':
    'answers lost in transit (replayed to a probe), repeated calls (run once), an instance stopping under load (no new call refused)',
  'nats-creds.e2e-spec.ts':
    'JWT/NKey identities (.creds) refused what their JWT and account do not allow',
  'object-store.e2e-spec.ts':
    'a rolling restart of two instances under encode/wait/send load (held embeddings handed over by both restarts), a stopped owner, corrupted and forged objects (M6), four never-acking sends at shutdown (M8), a full write queue',
};

function main(): void {
  const [dir, commit = 'unknown'] = process.argv.slice(2);
  if (!dir) throw new Error('usage: reliability-report <results-dir> <commit>');
  const jest = JSON.parse(readFileSync(join(dir, 'jest.json'), 'utf8')) as JestResults;
  const read = <T>(name: string): T | undefined =>
    existsSync(join(dir, name))
      ? (JSON.parse(readFileSync(join(dir, name), 'utf8')) as T)
      : undefined;
  const fuzz = read<{
    runs: number;
    seed: number;
    outcomes: Record<string, number>;
    valid_traffic: { ok: number; failed: number };
    failures: unknown[];
  }>('fuzz.json');
  const soak = read<{
    encodes: number;
    waits: number;
    seconds: number;
    heap_mb: { baseline: number; after: number };
    rss_mb: { baseline: number; after: number };
    heap_ratio: number;
    rss_ratio: number;
    counts_zero_after_ttl: boolean;
    bounds: { heap_ratio: number; rss_ratio: number };
  }>('soak.json');
  const restart = read<{
    answered_ok: number;
    answered_error: number;
    client_failed: number;
    never_answered: number;
    ready_again_after_ms: number;
    bound_never_answered: number;
  }>('nats-restart.json');
  const mb = (x: number) => x.toFixed(1);
  const lines = [
    '# Reliability',
    '',
    `\`npm run test:reliability\` on commit \`${commit}\`, ${new Date().toISOString().slice(0, 10)}:`,
    `${jest.numPassedTests} checks passed, ${jest.numFailedTests} failed. Regenerated by every run;`,
    'CI runs the same suites with fewer fuzz inputs and a shorter soak.',
    '',
    '| suite | what it tries or injects | checks | failed | seconds |',
    '| --- | --- | --- | --- | --- |',
  ];
  for (const r of jest.testResults) {
    const name = basename(r.name);
    const failed = r.assertionResults.filter((a) => a.status === 'failed').length;
    lines.push(
      `| ${name.replace('.e2e-spec.ts', '')} | ${WHAT[name] ?? ''} | ${r.assertionResults.length} | ${failed} | ${((r.endTime - r.startTime) / 1000).toFixed(0)} |`,
    );
  }
  if (fuzz) {
    const o = fuzz.outcomes;
    lines.push(
      '',
      '## Fuzzing',
      '',
      `${fuzz.runs} inputs (seed ${fuzz.seed}; \`EPD_FUZZ_SEED\` replays it).`,
      '',
      '| answered ok | 4xx naming the problem | documented 5xx | undocumented 5xx | hangs | valid calls in between (ok / failed) |',
      '| --- | --- | --- | --- | --- | --- |',
      `| ${o.ok ?? 0} | ${o['4xx'] ?? 0} | ${o['documented-5xx'] ?? 0} | ${o['undocumented-5xx'] ?? 0} | ${o.hang ?? 0} | ${fuzz.valid_traffic.ok} / ${fuzz.valid_traffic.failed} |`,
      '',
      'Documented 5xx are the waits that reach their deadline (`metadata_not_ready`, 504), sends',
      'to receivers that are not there, and `send` for a released req_id (`already_released`, 500,',
      'as SGLang answers). Registry and request state were back at zero after the TTL.',
    );
  }
  if (soak) {
    lines.push(
      '',
      '## Soak',
      '',
      '| encodes | waits | seconds | counts at zero after the TTL | heap MB (warmed → after) | RSS MB (warmed → after) | bounds asserted |',
      '| --- | --- | --- | --- | --- | --- | --- |',
      `| ${soak.encodes} | ${soak.waits} | ${soak.seconds} | ${soak.counts_zero_after_ttl ? 'yes' : 'no'} | ${mb(soak.heap_mb.baseline)} → ${mb(soak.heap_mb.after)} (${soak.heap_ratio.toFixed(2)}×) | ${mb(soak.rss_mb.baseline)} → ${mb(soak.rss_mb.after)} (${soak.rss_ratio.toFixed(2)}×) | heap ≤ ${soak.bounds.heap_ratio}×, RSS ≤ ${soak.bounds.rss_ratio}× |`,
      '',
      'Heap is read from the service’s own /metrics right after a full collection (the soak takes',
      'a heap snapshot first, through --heapsnapshot-signal); RSS is the kernel’s.',
    );
  }
  if (restart) {
    lines.push(
      '',
      '## nats-server killed and restarted mid-traffic',
      '',
      '| calls answered ok | answered with an error | failed on the client | never answered (client timeout) | service ready again after |',
      '| --- | --- | --- | --- | --- |',
      `| ${restart.answered_ok} | ${restart.answered_error} | ${restart.client_failed} | ${restart.never_answered} | ${restart.ready_again_after_ms} ms (1 s of it the server was down) |`,
      '',
      `The calls never answered are the ones in flight when the server died (their requests or`,
      `replies were lost with it; the test holds them to at most one per client worker, ${restart.bound_never_answered});`,
      'the service reconnected by itself, with no restart.',
    );
  }
  const faultDir = join(dir, 'faults');
  const faults = existsSync(faultDir)
    ? readdirSync(faultDir)
        .filter((f) => f.endsWith('.json'))
        .sort()
        .map((f) => JSON.parse(readFileSync(join(faultDir, f), 'utf8')) as FaultOutcome)
    : [];
  if (faults.length > 0) {
    lines.push(
      '',
      '## Faults injected',
      '',
      'Each fault, and what became of the calls it hit, counted from a client-side ledger of',
      'every call the test sent: answered ok, answered with an error (its types in the last',
      'column), or never answered within its deadline plus 2 s. "Silently lost" counts',
      'acknowledged work whose result no receiver got and no later call was told of (frames',
      'received per req_id, metadata read back after the fault); "left behind" counts waiters,',
      'request states and registry entries the admin API still showed afterwards. Each bound is',
      "asserted by the fault's own test, so a count above it fails CI.",
      '',
      '| fault | calls | answered ok | answered with an error | never answered | silently lost | left behind | bounds (never / lost / left) | slowest answer | errors by type |',
      '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
      ...faults.map(
        (f) =>
          `| ${f.fault} | ${f.calls} | ${f.answeredOk} | ${f.answeredError} | ${f.neverAnswered} | ${f.silentlyLost} | ${f.leftBehind} | ≤ ${f.bounds.maxNeverAnswered} / ${f.bounds.maxSilentlyLost} / ${f.bounds.maxLeftBehind} | ${f.slowestMs === undefined ? '' : `${Math.round(f.slowestMs)} ms`} | ${Object.entries(
            f.errorTypes,
          )
            .map(([t, n]) => `${t} ${n}`)
            .join(', ')} |`,
      ),
    );
  }
  writeFileSync(join(__dirname, '..', '..', 'docs', 'reliability.md'), `${lines.join('\n')}\n`);
  process.stdout.write(`${lines.join('\n')}\n`);
}

main();
