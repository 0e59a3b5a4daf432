/**
 * A burst of registry calls on one instance: N concurrent `wait_metadata` calls on distinct
 * req_ids (each declaring 15 s), then, 300 ms later, their N `publish_metadata` calls, as a
 * prefill cluster sends them. Through the service process at its defaults (memory store,
 * shedding and stepping out on), against a bare nats.js process doing the same job
 * (bench/raw-registry.ts: a Map of parked reply subjects, no validation, no framework), on
 * the same nats-server in the same run, alternated round by round. Reported: every wait
 * answered with its own metadata (the regression: at 2,000 every publish met "no
 * responders"), the time from the first publish to the last wait answered, and the main
 * thread's CPU per call of each phase (schedstat), service over raw. With
 * EPD_BENCH_COMPARE_DIST=<an earlier build's dist/> the same is measured for that build
 * too (how the handler shape's cost moved since).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { NatsServer } from '../test/support/nats-server';
import { QUICK, machine, mainThreadMs, median, round, runBench, writeReport } from './common';
import { ROOT, startService, stopProcess } from './service-process';

const SIZES = QUICK ? [2_000] : [2_000, 10_000];
const ROUNDS = QUICK ? 1 : 5;
const GAP_MS = 300;
const META = (i: number) => ({
  embedding_size: 4096 * (1 + (i % 7)),
  embedding_len: 1 + (i % 7),
  embedding_dim: 1024,
});

interface Target {
  label: string;
  pid: number;
  /** Subject of dp_type `dp`. */
  subject: (dp: string) => string;
}

interface Burst {
  failures: number;
  /** First publish sent → last wait answered, ms. */
  completionMs: number;
  /** Main-thread CPU per wait, and per publish with the wake of its waiter, ms. */
  waitCpuMs: number;
  publishCpuMs: number;
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function burst(nc: NatsConnection, t: Target, n: number, tag: string): Promise<Burst> {
  const inbox = `_BURST.${tag}`;
  let answered = 0;
  let failures = 0;
  let lastAt = 0;
  let resolveAll!: () => void;
  const all = new Promise<void>((r) => (resolveAll = r));
  const sub = nc.subscribe(`${inbox}.*`, {
    callback: (_e, msg) => {
      const kind = msg.subject.charAt(inbox.length + 1);
      const i = Number(msg.subject.slice(inbox.length + 2));
      if (msg.headers?.code === 503) failures++;
      else {
        const a = msg.json<{
          response?: { req_id?: string; embedding_len?: number };
          err?: unknown;
        }>();
        if (a.err) failures++;
        else if (
          kind === 'w' &&
          (a.response?.req_id !== `${tag}-${i}` ||
            a.response.embedding_len !== META(i).embedding_len)
        )
          failures++;
      }
      if (++answered === 2 * n) {
        lastAt = performance.now();
        resolveAll();
      }
    },
  });
  await nc.flush();
  const cpu0 = mainThreadMs(t.pid);
  for (let i = 0; i < n; i++)
    nc.publish(
      t.subject('wait_metadata'),
      JSON.stringify({ req_id: `${tag}-${i}`, timeout_ms: 15_000 }),
      {
        reply: `${inbox}.w${i}`,
      },
    );
  await nc.flush();
  await pause(GAP_MS);
  const cpuW = mainThreadMs(t.pid);
  const sent = performance.now();
  for (let i = 0; i < n; i++)
    nc.publish(
      t.subject('publish_metadata'),
      JSON.stringify({ req_id: `${tag}-${i}`, metadata: META(i) }),
      { reply: `${inbox}.p${i}` },
    );
  await nc.flush();
  let timer: NodeJS.Timeout | undefined;
  const timedOut = await Promise.race([
    all.then(() => false),
    new Promise<boolean>((r) => (timer = setTimeout(() => r(true), 30_000))),
  ]);
  // Cleared, or every burst's timer would hold the process open for 30 s after the run.
  clearTimeout(timer);
  const cpu1 = mainThreadMs(t.pid);
  sub.unsubscribe();
  if (timedOut) failures += 2 * n - answered;
  return {
    failures,
    completionMs: timedOut ? NaN : lastAt - sent,
    waitCpuMs: (cpuW - cpu0) / n,
    publishCpuMs: (cpu1 - cpuW) / n,
  };
}

async function main() {
  const nats = await NatsServer.start();
  const nc = await connect({ servers: nats.url });
  const stops: (() => Promise<void>)[] = [];
  try {
    const targets: Target[] = [];
    const service = await startService({ EPD_NATS_URL: nats.url, EPD_SUBJECT_PREFIX: 'svc' });
    stops.push(service.stop);
    targets.push({ label: 'service', pid: service.proc.pid!, subject: (dp) => `svc.v1.${dp}` });
    const raw: ChildProcess = spawn(
      process.execPath,
      [join(ROOT, 'dist-bench', 'bench', 'raw-registry.js'), nats.url, 'raw.v1'],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    stops.push(() => stopProcess(raw));
    await new Promise<void>((r) => raw.stdout!.once('data', () => r()));
    targets.push({ label: 'raw nats.js', pid: raw.pid!, subject: (dp) => `raw.v1.${dp}` });
    const compare = process.env.EPD_BENCH_COMPARE_DIST;
    if (compare) {
      const old = await startService(
        { EPD_NATS_URL: nats.url, EPD_SUBJECT_PREFIX: 'old' },
        undefined,
        join(compare, 'main.js'),
      );
      stops.push(old.stop);
      // Named by its commit, never by where it was built.
      const sha = (() => {
        try {
          return execFileSync('git', ['-C', join(compare, '..'), 'rev-parse', '--short', 'HEAD'], {
            encoding: 'utf8',
          }).trim();
        } catch {
          return 'unknown commit';
        }
      })();
      targets.push({
        label: `the build at ${sha}`,
        pid: old.proc.pid!,
        subject: (dp) => `old.v1.${dp}`,
      });
    }
    // Warm-up: one small burst each.
    for (const t of targets) await burst(nc, t, 500, `warm-${t.label.length}`);
    const results = new Map<string, Map<number, Burst[]>>();
    for (let r = 0; r < ROUNDS; r++)
      for (const n of SIZES)
        for (const [k, t] of targets.entries()) {
          const b = await burst(nc, t, n, `r${r}n${n}t${k}`);
          const byN = results.get(t.label) ?? new Map<number, Burst[]>();
          byN.set(n, [...(byN.get(n) ?? []), b]);
          results.set(t.label, byN);
        }
    const med = (label: string, n: number, f: (b: Burst) => number) =>
      median(results.get(label)!.get(n)!.map(f));
    const failures = (label: string, n: number) =>
      results
        .get(label)!
        .get(n)!
        .reduce((s, b) => s + b.failures, 0);
    const table: string[][] = [
      [
        'path',
        'burst',
        'calls failed (all rounds)',
        'first publish → last wait answered, ms (median)',
        'main-thread CPU per wait, ms',
        'per publish + wake, ms',
      ],
    ];
    for (const t of targets)
      for (const n of SIZES)
        table.push([
          t.label,
          String(n),
          String(failures(t.label, n)),
          String(
            round(
              med(t.label, n, (b) => b.completionMs),
              1,
            ),
          ),
          String(
            round(
              med(t.label, n, (b) => b.waitCpuMs),
              4,
            ),
          ),
          String(
            round(
              med(t.label, n, (b) => b.publishCpuMs),
              4,
            ),
          ),
        ]);
    const targetsOut = SIZES.flatMap((n) => {
      const cpu = (label: string) => med(label, n, (b) => b.waitCpuMs + b.publishCpuMs);
      const ratio = cpu('service') / cpu('raw nats.js');
      const done =
        med('service', n, (b) => b.completionMs) / med('raw nats.js', n, (b) => b.completionMs);
      return [
        {
          metric: `${n}-wait burst: calls not answered with their own value (service, ${ROUNDS} rounds)`,
          target: '0',
          value: failures('service', n),
          pass: failures('service', n) === 0,
        },
        {
          metric: `${n}-wait burst: main-thread CPU per wait + publish, service / raw nats.js`,
          target: 'report',
          value: round(ratio, 2),
          pass: true,
        },
        {
          metric: `${n}-wait burst: first publish → last wait answered, service / raw nats.js`,
          target: 'report',
          value: round(done, 2),
          pass: true,
        },
      ];
    });
    const old = targets[2];
    const notes: string[] = [];
    if (old)
      for (const n of SIZES) {
        const cpu = (label: string) => med(label, n, (b) => b.waitCpuMs + b.publishCpuMs);
        notes.push(
          `${n}-wait burst: CPU per wait + publish, this build / ${old.label}: ${round(cpu('service') / cpu(old.label), 2)}; calls failed there: ${failures(old.label, n)}.`,
        );
      }
    writeReport({
      name: 'registry-burst',
      quick: QUICK,
      machine: machine(),
      baseline:
        'a bare nats.js process doing the registry job (bench/raw-registry.ts), same nats-server, alternated round by round',
      results: Object.fromEntries(
        [...results].map(([label, byN]) => [label, Object.fromEntries(byN)]),
      ),
      targets: targetsOut,
      table,
      notes: [
        `Each round: ${SIZES.join(' and ')} concurrent wait_metadata calls (timeout_ms 15000) on distinct req_ids, then ${GAP_MS} ms later their publish_metadata calls, on one instance at its defaults; ${ROUNDS} rounds, medians over rounds.`,
        "CPU: the main thread's on-CPU time (schedstat) over each phase, divided by the calls of the phase; the wait phase includes the gap (idle).",
        ...notes,
      ],
    });
  } finally {
    await nc.drain();
    for (const stop of stops.reverse()) await stop();
    await nats.dispose();
  }
}

runBench(main);
