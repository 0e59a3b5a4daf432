import { waitFor } from './wait';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SERVICE_ENV, SERVICE_NODE_FLAGS } from '../../src/common/node-flags';
import { freePort } from './nats-server';
import { REPO_ROOT } from './repo-root';
import { leftOpen } from './left-open';
import { sharedNatsUrl, uniquePrefix } from './shared-nats';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { loadConfig } from '../../src/config/config.loader';
import { shutdownBoundMs } from '../../src/config/shutdown-bound';

export const MAIN = join(REPO_ROOT, 'dist', 'main.js');

export interface ServiceProcess {
  proc: ChildProcess;
  url: string;
  output(): string;
  /** Resident set size now, in bytes (VmRSS). */
  rss(): number;
  /** Peak RSS since start or since the last resetPeak(), in bytes (VmHWM). */
  peakRss(): number;
  /** Resets the kernel's peak-RSS counter (clear_refs 5), so one input's peak can be read. */
  resetPeak(): void;
  stop(): Promise<void>;
}

function status(pid: number, field: string): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(
    readFileSync(`/proc/${pid}/status`, 'utf8'),
  );
  return m ? Number(m[1]) * 1024 : NaN;
}

/**
 * The built service (`dist/main.js`) as its own process, ready on a free port (`readyPath`
 * answers 200: /health/ready by default, /health when NATS is meant to be down); stopped
 * by PID. `flags`: its V8 flags, those npm start passes unless a test means otherwise.
 */
export async function startServiceProcess(
  env: Record<string, string>,
  readyPath = '/health/ready',
  flags: readonly string[] = SERVICE_NODE_FLAGS,
): Promise<ServiceProcess> {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run "npm run build" first`);
  const port = await freePort();
  const fullEnv = {
    ...SERVICE_ENV,
    ...process.env,
    EPD_HTTP_PORT: String(port),
    EPD_LOG_LEVEL: 'warn',
    // The generated reference models, also when a benchmark (no NODE_ENV=test) starts it.
    EPD_ALLOW_REFERENCE_MODEL: 'true',
    ...env,
  };
  const killAfterMs = killBoundMs(fullEnv);
  const proc = spawn(process.execPath, [...flags, MAIN], {
    env: fullEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout?.on('data', (b: Buffer) => (out = (out + b.toString()).slice(-200_000)));
  proc.stderr?.on('data', (b: Buffer) => (out = (out + b.toString()).slice(-200_000)));
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitFor(
      async () => {
        if (proc.exitCode !== null) throw new Error(`service exited (${proc.exitCode})`);
        return fetch(`${url}${readyPath}`).then(
          (r) => r.status === 200,
          () => false,
        );
      },
      30_000,
      100,
    );
  } catch (err) {
    proc.kill('SIGKILL');
    throw new Error(`service did not become ready (${(err as Error).message}):\n${out}`, {
      cause: err,
    });
  }
  const pid = proc.pid!;
  return {
    proc,
    url,
    output: () => out,
    rss: () => status(pid, 'VmRSS'),
    peakRss: () => status(pid, 'VmHWM'),
    resetPeak: () => writeFileSync(`/proc/${pid}/clear_refs`, '5'),
    stop: leftOpen({ close: () => stopProcess(proc, killAfterMs) }),
  };
}

/**
 * When to SIGKILL a service that a SIGTERM has not stopped: past the bound it keeps itself
 * (shutdownBoundMs: it exits with 1 there), by 5 s. A shorter one killed drains that were
 * still handing staged embeddings over (the default bound is 14.5 s with the JetStream
 * tier; the harness once killed at 8 s), and the test then missed the drain's report.
 */
export function killBoundMs(env: NodeJS.ProcessEnv): number {
  try {
    return shutdownBoundMs(loadConfig(env).config) + 5000;
  } catch {
    return 30_000; // a configuration the service refuses: it exits at once anyway
  }
}

/** The PIDs of `pid`'s child processes now (Linux: its main thread's `children`). */
export function childPids(pid: number): number[] {
  return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
    .trim()
    .split(/\s+/)
    .filter(Boolean)
    .map(Number);
}

/**
 * Whether process `pid` has exited: no longer there, or a zombie (an orphan that exited
 * lingers as one until PID 1 reaps it, and a signal 0 still reaches it).
 */
export function exited(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.startsWith('Z');
  } catch {
    return true;
  }
}

/**
 * SIGTERM, then SIGKILL after `killAfterMs`; resolves when the process (by its PID) has
 * exited. Its `exitCode` (0: a clean stop) or `signalCode` then says how it ended.
 */
export async function stopProcess(proc: ChildProcess, killAfterMs = 8000): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  proc.kill('SIGTERM');
  const timer = setTimeout(() => proc.kill('SIGKILL'), killAfterMs);
  await exited;
  clearTimeout(timer);
}

/** One instance of a multi-instance suite: its EPD_INSTANCE_ID and its process. */
export interface Instance {
  id: string;
  svc: ServiceProcess;
}

/**
 * A function that starts instances of one suite: `<tag><pid>` on the shared nats-server,
 * with the suite's prefix, JetStream metadata bucket, half-second heartbeats and `env`,
 * each added to `started` (which the suite stops after).
 */
export function instanceStarter(
  base: { prefix: string; kvBucket: string; natsUrl: string; env: Record<string, string> },
  started: Instance[],
): (tag: string, env?: Record<string, string>) => Promise<Instance> {
  return async (tag, env = {}) => {
    const id = `${tag}${process.pid}`;
    const svc = await startServiceProcess({
      EPD_NATS_URL: base.natsUrl,
      EPD_SUBJECT_PREFIX: base.prefix,
      EPD_REGISTRY_STORE: 'jetstream',
      EPD_KV_BUCKET: base.kvBucket,
      EPD_INSTANCE_ID: id,
      EPD_INSTANCE_HEARTBEAT_MS: '500',
      ...base.env,
      ...env,
    });
    const inst = { id, svc };
    started.push(inst);
    return inst;
  };
}

/**
 * A service process on the shared nats-server under a fresh subject prefix (`env` over
 * that), and a NATS connection of the test's own; `close` ends both.
 */
export async function serviceWithClient(env: Record<string, string> = {}): Promise<{
  svc: ServiceProcess;
  nc: NatsConnection;
  prefix: string;
  close: () => Promise<void>;
}> {
  const prefix = env.EPD_SUBJECT_PREFIX ?? uniquePrefix();
  const svc = await startServiceProcess({
    EPD_NATS_URL: sharedNatsUrl(),
    EPD_SUBJECT_PREFIX: prefix,
    ...env,
  });
  const nc = await connect({ servers: sharedNatsUrl() });
  return {
    svc,
    nc,
    prefix,
    close: async () => {
      await nc.close();
      await svc.stop();
    },
  };
}

/**
 * Runs the built service, meant not to start, to its exit: exit code and output. Neither
 * the test configuration (NODE_ENV=test) nor an inherited EPD_ALLOW_REFERENCE_MODEL
 * applies, unless `testConfig` (a refusal that is not about the model); a service still
 * running after 30 s is killed by its PID and the call fails.
 */
export function runServiceToExit(
  env: Record<string, string>,
  testConfig = false,
): Promise<{ code: number | null; out: string }> {
  const base = { ...process.env };
  if (!testConfig) {
    delete base.NODE_ENV; // not the test configuration, which allows the stand-in
    delete base.EPD_ALLOW_REFERENCE_MODEL;
  }
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [MAIN], {
      env: {
        ...base,
        EPD_NATS_URL: sharedNatsUrl(),
        EPD_HTTP_PORT: '0',
        EPD_LOG_LEVEL: 'warn',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    proc.stdout.on('data', (b: Buffer) => (out += b.toString()));
    proc.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`the service did not exit:\n${out}`));
    }, 30_000);
    proc.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}
