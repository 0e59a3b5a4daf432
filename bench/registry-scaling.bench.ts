/**
 * Registry publish→resolve cost with N pending waiters on other req_ids, and heap bytes
 * per pending waiter. Ratio baseline: the same measurement at the smallest N, same run.
 * Run with --expose-gc (npm run bench does).
 */
import type { Subscription } from 'rxjs';
import { makeRegistry } from '../src/meta-registry/testing';
import { QUICK, machine, round, runBench, summarize, writeReport } from './common';

const META = { embedding_size: 4096, embedding_len: 1, embedding_dim: 1024 };
const SIZES = QUICK ? [1_000, 10_000, 100_000] : [1_000, 10_000, 100_000, 1_000_000];
const PROBES = QUICK ? 5_000 : 20_000;

const gc = (globalThis as { gc?: () => void }).gc;
function heapUsed(): number {
  gc?.();
  gc?.();
  return process.memoryUsage().heapUsed;
}

async function measure(n: number) {
  const { registry } = makeRegistry({
    EPD_REGISTRY_MAX_WAITERS: String(n + 10),
    EPD_REQ_TIMEOUT_MS: String(3_600_000),
  });
  const before = heapUsed();
  const subs: Subscription[] = new Array<Subscription>(n);
  for (let i = 0; i < n; i++)
    subs[i] = registry.wait$(`pending-${i}`).subscribe({ error: () => undefined });
  await new Promise((r) => setImmediate(r)); // let the initial store reads settle
  const bytesPerWaiter = (heapUsed() - before) / n;

  // Warm up, then time publish → waiter callback for fresh req_ids.
  const samples: number[] = [];
  for (let i = 0; i < PROBES + 500; i++) {
    const id = `probe-${n}-${i}`;
    let resolvedAt = 0n;
    const done = new Promise<void>((resolve) =>
      registry.wait$(id).subscribe(() => {
        resolvedAt = process.hrtime.bigint();
        resolve();
      }),
    );
    await new Promise((r) => setImmediate(r));
    const t0 = process.hrtime.bigint();
    await registry.publish(id, META);
    await done;
    if (i >= 500) samples.push(Number(resolvedAt - t0) / 1e3); // µs
    await registry.discard(id);
  }
  const stats = await registry.stats();
  for (const s of subs) s.unsubscribe();
  const after = await registry.stats();
  registry.close();
  return {
    n,
    bytesPerWaiter,
    latencyUs: summarize(samples),
    pendingDuring: stats.waiters,
    pendingAfter: after.waiters,
  };
}

async function main() {
  if (!gc) throw new Error('run with node --expose-gc');
  await measure(SIZES[0]!); // JIT warm-up, discarded: the first size is the ratio's baseline
  const rows = [];
  for (const n of SIZES) {
    const r = await measure(n);
    rows.push(r);
    process.stderr.write(
      `n=${n}: ${round(r.bytesPerWaiter, 0)} B/waiter, p50 ${round(r.latencyUs.p50, 2)} µs\n`,
    );
  }
  const base = rows[0]!;
  const last = rows[rows.length - 1]!;
  const ratioP50 = last.latencyUs.p50 / base.latencyUs.p50;
  const maxBytes = Math.max(...rows.map((r) => r.bytesPerWaiter));
  writeReport({
    name: 'registry-scaling',
    quick: QUICK,
    machine: machine(),
    baseline: `publish→resolve with ${base.n} pending waiters (same run)`,
    results: { rows },
    targets: [
      {
        metric: `p50 publish→resolve at ${last.n} vs ${base.n} waiters`,
        target: '≤ 2×',
        value: round(ratioP50, 2),
        pass: ratioP50 <= 2,
      },
      {
        metric: 'heap bytes per pending waiter (max)',
        target: '≤ 3072',
        value: round(maxBytes, 0),
        pass: maxBytes <= 3072,
      },
    ],
    table: [
      [
        'pending waiters',
        'p50 µs',
        'p99 µs',
        'ratio p50 vs first',
        'heap B/waiter',
        'left after unsubscribe',
      ],
      ...rows.map((r) => [
        String(r.n),
        String(round(r.latencyUs.p50, 2)),
        String(round(r.latencyUs.p99, 2)),
        String(round(r.latencyUs.p50 / base.latencyUs.p50, 2)),
        String(round(r.bytesPerWaiter, 0)),
        String(r.pendingAfter),
      ]),
    ],
  });
}

runBench(main);
