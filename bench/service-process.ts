import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from '@nats-io/transport-node';
import { readdirSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import { join } from 'node:path';
import { SERVICE_ENV, SERVICE_NODE_FLAGS } from '../src/common/node-flags';
import { freePort } from '../test/support/nats-server';
import { stopProcess } from '../test/support/service-process';

export const ROOT = join(__dirname, '..', '..');

/**
 * The priority benchmarks start with. A benchmark that lowers its own priority (so that
 * the load it generates yields the CPU to the service) would otherwise hand that
 * priority on to every service it spawns: Linux children and threads inherit it.
 */
const STARTING_PRIORITY = getPriority();

/**
 * Gives every thread of `pid` the priority `priority`: Linux priorities are per thread,
 * and os.setPriority(pid) sets only the main one's (a Go server's or a Node process's
 * helper threads kept theirs). Raising a priority needs privilege (root here and in CI);
 * without it the process keeps what it had, and the warning says so.
 */
export function setProcessPriority(pid: number, priority: number): void {
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) setPriority(Number(tid), priority);
  } catch (err) {
    if (getPriority(pid) !== priority)
      process.stderr.write(`process ${pid} keeps priority ${getPriority(pid)}: ${String(err)}\n`);
  }
}

const restorePriority = (pid: number) => setProcessPriority(pid, STARTING_PRIORITY);

/**
 * The environment without the benchmarks' own EPD_BENCH_* settings: they are read here,
 * and the service would warn about each as an unknown EPD_ variable.
 */
function withoutBenchSettings(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([k]) => !k.startsWith('EPD_BENCH_')));
}

/**
 * Starts `node dist/main.js` on a free port, launched as npm start launches it (`flags`,
 * SERVICE_NODE_FLAGS unless a benchmark compares without them), and waits until /health
 * is 200.
 */
export async function startService(
  env: Record<string, string>,
  flags: readonly string[] = SERVICE_NODE_FLAGS,
  /** Another build's main.js (a comparison with an earlier commit's dist/). */
  mainJs: string = join(ROOT, 'dist', 'main.js'),
): Promise<{ proc: ChildProcess; url: string; stop: () => Promise<void> }> {
  const port = await freePort();
  const nodeArgs = [...flags];
  if (process.env.EPD_BENCH_PROFILE_DIR)
    nodeArgs.push('--cpu-prof', `--cpu-prof-dir=${process.env.EPD_BENCH_PROFILE_DIR}`);
  // Extra V8/Node flags for a diagnosis run (for example `--trace-gc`), space-separated.
  nodeArgs.push(...(process.env.EPD_BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean));
  const proc = spawn(process.execPath, [...nodeArgs, mainJs], {
    env: {
      ...SERVICE_ENV,
      ...withoutBenchSettings(process.env),
      EPD_HTTP_PORT: String(port),
      EPD_LOG_LEVEL: 'warn',
      // The benchmarks measure the generated reference models.
      EPD_ALLOW_REFERENCE_MODEL: 'true',
      ...env,
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  // At once, so that the threads the service starts inherit it, and again once it is up.
  if (proc.pid) restorePriority(proc.pid);
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    const ok = await fetch(`${url}/health`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) {
      restorePriority(proc.pid!);
      break;
    }
    if (Date.now() > deadline || proc.exitCode !== null) {
      proc.kill('SIGKILL'); // by its PID: never left running behind a failed benchmark
      throw new Error('service did not become ready');
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  // /health is up before the NATS subjects are served (HTTP works without NATS): a
  // benchmark's first NATS call could meet no responders (a quick run in CI did). Wait
  // until one is answered.
  const servers = env.EPD_NATS_URL;
  if (servers) {
    const nc = await connect({ servers });
    try {
      // This instance's own subject when it has an id (a peer on the same prefix could
      // answer the shared one first).
      const prefix = env.EPD_SUBJECT_PREFIX ?? 'epd';
      const subject = env.EPD_INSTANCE_ID
        ? `${prefix}.v1.inst.${env.EPD_INSTANCE_ID}.has_metadata`
        : `${prefix}.v1.has_metadata`;
      for (;;) {
        const answered = await nc
          .request(subject, JSON.stringify({ req_id: 'bench-ready' }), { timeout: 1000 })
          .then(
            () => true,
            () => false,
          );
        if (answered) break;
        if (Date.now() > deadline || proc.exitCode !== null)
          throw new Error(`service did not serve ${subject}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    } finally {
      await nc.close();
    }
  }
  return { proc, url, stop: () => stopProcess(proc) };
}

/**
 * The baseline of the NATS benchmarks: a bare nats.js responder in its own process
 * (raw-responder.ts) answering every call on `subject` with the fixed `reply`; resolves
 * once it is subscribed. Stop it with stopProcess.
 */
export async function startRawResponder(
  natsUrl: string,
  subject: string,
  reply: string,
): Promise<ChildProcess> {
  const proc = spawn(
    process.execPath,
    [join(ROOT, 'dist-bench', 'bench', 'raw-responder.js'), natsUrl, subject, reply],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  await new Promise<void>((resolve) => proc.stdout.once('data', () => resolve()));
  return proc;
}

export { stopProcess };
