import sharp from 'sharp';
import { execFileSync } from 'node:child_process';
import type { NatsConnection } from '@nats-io/transport-node';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';

// The services and registries a benchmark starts keep their restart ledgers (and default
// profile dirs) under XDG_STATE_HOME: a temporary one, never the home directory.
const state = mkdtempSync(join(tmpdir(), 'epd-bench-state-'));
process.env.XDG_STATE_HOME = state;
process.once('exit', () => rmSync(state, { recursive: true, force: true }));

export const QUICK = process.argv.includes('--quick');
/**
 * Full runs write bench/results/ (committed); quick runs (the CI smoke test) write
 * bench/results/quick/ (ignored by git), so a smoke run never stands in for a measurement.
 */
export const RESULTS_DIR = join(
  __dirname,
  '..',
  '..',
  'bench',
  'results',
  ...(QUICK ? ['quick'] : []),
  // scripts/device-check.sh: one directory per execution provider (device/<provider>).
  ...(process.env.EPD_BENCH_RESULTS_SUBDIR ? [process.env.EPD_BENCH_RESULTS_SUBDIR] : []),
);

/** The execution providers the service and the in-process baselines use (EPD_ORT_EXECUTION_PROVIDERS). */
export const EXECUTION_PROVIDERS = (process.env.EPD_ORT_EXECUTION_PROVIDERS ?? 'cpu')
  .split(',')
  .map((p) => p.trim())
  .filter(Boolean);

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[idx]!;
}

/** The middle value (the upper one of an even count). */
export const median = (xs: number[]): number =>
  [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export function summarize(samplesMs: number[]): {
  n: number;
  p50: number;
  p99: number;
  mean: number;
} {
  const s = [...samplesMs].sort((a, b) => a - b);
  const mean = s.reduce((a, b) => a + b, 0) / Math.max(1, s.length);
  return { n: s.length, p50: percentile(s, 50), p99: percentile(s, 99), mean };
}

/** On-CPU time of `pid`'s main thread, in ms (Linux schedstat: nanoseconds). */
export function mainThreadMs(pid: number): number {
  return mainThreadSched(pid).onCpuMs;
}

/**
 * `pid`'s time on a CPU over every thread it has now, in ms, at nanosecond resolution
 * (schedstat; /proc/<pid>/stat counts 10 ms ticks). Threads that already exited are not
 * counted: measure long-lived threads (a service's pools), not short-lived ones.
 */
export function processOnCpuMs(pid: number): number {
  let ms = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) ms += threadOnCpuMs(pid, Number(tid));
  return ms;
}

/** Thread `tid` of `pid`: its time on a CPU, in ms (0 once it has exited). */
export function threadOnCpuMs(pid: number, tid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
  } catch {
    return 0; // the thread exited
  }
}

/** `pid`'s main thread: time on a CPU, and time runnable but waiting for one, in ms. */
export function mainThreadSched(pid: number): { onCpuMs: number; waitingMs: number } {
  const [run, wait] = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ');
  return { onCpuMs: Number(run) / 1e6, waitingMs: Number(wait) / 1e6 };
}

/** Collections of one kind, and their pause time in seconds. */
export interface GcTotals {
  count: number;
  seconds: number;
}

/**
 * The main thread's garbage collections so far of the service at `url`, from its own
 * /metrics (prom-client's nodejs_gc_duration_seconds): full (major) and young-generation
 * (minor) ones. A kind not collected yet has no series: 0.
 */
export async function serviceGc(url: string): Promise<{ major: GcTotals; minor: GcTotals }> {
  const text = await (await fetch(`${url}/metrics`)).text();
  if (!text.includes('nodejs_gc_duration_seconds'))
    throw new Error('no nodejs_gc_duration_seconds in /metrics');
  const read = (stat: 'count' | 'sum', kind: string) =>
    Number(
      new RegExp(`^nodejs_gc_duration_seconds_${stat}\\{kind="${kind}"\\} (\\S+)$`, 'm').exec(
        text,
      )?.[1] ?? 0,
    );
  const totals = (kind: string) => ({ count: read('count', kind), seconds: read('sum', kind) });
  return { major: totals('major'), minor: totals('minor') };
}

export const round = (x: number, digits = 3) => Math.round(x * 10 ** digits) / 10 ** digits;

export interface BenchTarget {
  metric: string;
  target: string;
  value: number;
  pass: boolean;
}

export interface BenchReport {
  name: string;
  quick: boolean;
  machine: { cpus: number; model: string; memGiB: number; node: string };
  baseline: string;
  results: Record<string, unknown>;
  targets: BenchTarget[];
  table: string[][];
  notes?: string[];
}

/** One run of a benchmark as its results file keeps it: when, where, at which commit. */
export interface BenchRun {
  commit: string;
  date: string;
  machine: BenchReport['machine'];
  targets: BenchTarget[];
}

/** What bench/results/<name>.json holds: the latest run in full, and every run's targets. */
export interface BenchFile extends BenchReport {
  commit: string;
  date: string;
  runs: BenchRun[];
}

export function machine(): BenchReport['machine'] {
  return {
    cpus: cpus().length,
    model: cpus()[0]?.model ?? 'unknown',
    memGiB: round(totalmem() / 2 ** 30, 1),
    node: process.version,
  };
}

/** The commit measured: its short hash, with "+dirty" when the work tree has changes. */
export function commitMeasured(): string {
  const git = (args: string[]) => {
    try {
      return execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    } catch {
      return undefined;
    }
  };
  const head = git(['rev-parse', '--short', 'HEAD'])?.trim();
  if (!head) return 'unknown';
  const dirty = git([
    'status',
    '--porcelain',
    '--untracked-files=no',
    '--',
    'src',
    'bench',
    'scripts',
  ]);
  return dirty?.trim() ? `${head}+dirty` : head;
}

/** One target's values over the runs kept, oldest first. */
export const valuesOf = (runs: readonly BenchRun[], metric: string): number[] =>
  runs.flatMap((r) => r.targets.filter((t) => t.metric === metric).map((t) => t.value));

/** Median and range of one target over every run kept, as "median (min–max, n runs)". */
export function spread(values: number[]): string {
  if (values.length === 0) return '';
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  return n === 1
    ? `${sorted[0]} (1 run)`
    : `${median(sorted)} (${sorted[0]}–${sorted[n - 1]}, ${n} runs)`;
}

/**
 * Writes bench/results/<name>.json and <name>.md (a markdown table plus targets). Every
 * run is kept: the file's `runs` gains this one, and the targets table gives each target's
 * median and range over them beside this run's value, so no run stands alone.
 */
export function writeReport(report: BenchReport): void {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const path = join(RESULTS_DIR, `${report.name}.json`);
  let earlier: BenchRun[] = [];
  try {
    earlier = (JSON.parse(readFileSync(path, 'utf8')) as Partial<BenchFile>).runs ?? [];
  } catch {
    // first run
  }
  const run: BenchRun = {
    commit: commitMeasured(),
    date: new Date().toISOString(),
    machine: report.machine,
    targets: report.targets,
  };
  const runs = [...earlier, run];
  const file: BenchFile = { ...report, commit: run.commit, date: run.date, runs };
  writeFileSync(path, `${JSON.stringify(file, null, 2)}\n`);
  const [head, ...rows] = report.table;
  const over = (metric: string) => spread(valuesOf(runs, metric));
  const md = [
    `# ${report.name}${report.quick ? ' (quick)' : ''}`,
    '',
    `Commit ${run.commit}, ${run.date}. Machine: ${report.machine.cpus} × ${report.machine.model}, ${report.machine.memGiB} GiB, Node ${report.machine.node}. Baseline: ${report.baseline}.`,
    '',
    `| ${head!.join(' | ')} |`,
    `| ${head!.map(() => '---').join(' | ')} |`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
    '',
    '| target | wanted | this run | pass | every run kept: median (range) |',
    '| --- | --- | --- | --- | --- |',
    ...report.targets.map(
      (t) =>
        `| ${t.metric} | ${t.target} | ${t.value} | ${t.pass ? 'yes' : 'NO'} | ${over(t.metric)} |`,
    ),
    '',
    `Runs kept: ${runs.map((r) => `${r.commit} (${r.date.slice(0, 10)})`).join(', ')}.`,
    ...(report.notes?.length ? ['', ...report.notes.map((n) => `- ${n}`)] : []),
    '',
  ].join('\n');
  writeFileSync(join(RESULTS_DIR, `${report.name}.md`), md);
  process.stdout.write(`${md}\n`);
}

/** Runs a benchmark's main, exiting non-zero with the error if it fails. */
export function runBench(main: () => Promise<void>): void {
  main().catch((err: unknown) => {
    console.error(err);
    // A benchmark that failed before its own clean-up (a service that never became ready)
    // leaves no server behind: every child process it started is stopped, by PID.
    for (const pid of childPids()) {
      try {
        process.kill(pid, 'SIGTERM');
      } catch {
        // already gone
      }
    }
    process.exit(1);
  });
}

/** This process's child processes now (Linux: its main thread's `children`). */
function childPids(): number[] {
  try {
    return readFileSync(`/proc/${process.pid}/task/${process.pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

/** Publishes `bench-0` … `bench-{n-1}` with `metadata` through the service's NATS API. */
export async function publishBenchEntries(
  nc: NatsConnection,
  prefix: string,
  n: number,
  metadata: object,
): Promise<void> {
  for (let i = 0; i < n; i++) {
    await nc.request(
      `${prefix}.v1.publish_metadata`,
      JSON.stringify({ req_id: `bench-${i}`, part_idx: 0, metadata }),
      { timeout: 5000 },
    );
  }
}

/** POST `body` as JSON; the reply's JSON, or a thrown error naming the status. */
export async function httpJson(url: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  if (res.status !== 200) throw new Error(`${url}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** A 448×448 PNG data URI of one colour per `i`: distinct images, so none is a cache hit. */
export function distinctPng(i: number): Promise<string> {
  return sharp({
    create: {
      width: 448,
      height: 448,
      channels: 3,
      background: { r: i % 256, g: (i >> 8) % 256, b: (i * 7) % 256 },
    },
  })
    .png()
    .toBuffer()
    .then((b) => `data:image/png;base64,${b.toString('base64')}`);
}
