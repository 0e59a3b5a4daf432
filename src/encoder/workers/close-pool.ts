import { readlinkSync } from 'node:fs';
import { isMainThread, parentPort, threadId } from 'node:worker_threads';
import Piscina from 'piscina';
import { Errors } from '../../common/errors/error-catalogue';
import { withTimeout } from '../../common/timeout';

const LOADED = 'epd:worker-loaded';

/** Pools that closePool has begun to close. */
const closedPools = new WeakSet<Piscina>();

/**
 * Each pool's threads that have loaded their module (see announceLoaded), by Node thread
 * id, with their operating-system thread id where known.
 */
const loadedThreads = new WeakMap<Piscina, Map<number, number | undefined>>();

/**
 * This thread's id in the operating system (Linux: /proc/<pid>/task/<tid>), undefined
 * elsewhere: what per-thread CPU accounting (schedstat) is keyed by.
 */
function osThreadId(): number | undefined {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    return Number.isInteger(tid) ? tid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Called by a worker module once its imports are loaded (at its end): a thread is safe to
 * terminate from then on. Stopping one mid-load aborted the whole process: inside ONNX
 * Runtime's addon initialisation (`terminate called after throwing an instance of
 * 'Napi::Error'`), or inside Node 20's synchronous require of an ESM package, the audio
 * decoders (`v8::Module::IsGraphAsync must be used on an instantiated module`).
 */
export function announceLoaded(): void {
  if (!isMainThread) parentPort?.postMessage({ [LOADED]: threadId, tid: osThreadId() });
}

/** The operating-system thread ids of `pool`'s threads that have loaded (see announceLoaded). */
export function poolThreadIds(pool: Piscina): number[] {
  return [...(loadedThreads.get(pool)?.values() ?? [])].filter((tid) => tid !== undefined);
}

/** A piscina pool whose threads' loading closePool waits for. */
export function createPool(options: ConstructorParameters<typeof Piscina>[0]): Piscina {
  const pool = new Piscina(options);
  const loaded = new Map<number, number | undefined>();
  loadedThreads.set(pool, loaded);
  pool.on('message', (message: unknown) => {
    if (typeof message !== 'object' || message === null || !(LOADED in message)) return;
    const { [LOADED]: id, tid } = message as { [LOADED]: number; tid?: number };
    loaded.set(id, tid);
  });
  pool.on('workerDestroy', (worker: { id: number }) => loaded.delete(worker.id));
  return pool;
}

/**
 * `pool.run`, refused with 503 "encoder shutting down" once closePool has begun: piscina
 * starts fresh threads for a task given to a pool it has destroyed (by design: a
 * destroyed pool keeps no state), so a request still in the pipeline at shutdown would
 * bring ONNX Runtime or libvips back up in a process on its way out.
 */
export function runTask<T>(
  pool: Piscina,
  task: unknown,
  options?: Parameters<Piscina['run']>[1],
): Promise<T> {
  if (closedPools.has(pool)) return Promise.reject(Errors.shuttingDown());
  return pool.run(task, options) as Promise<T>;
}

/**
 * Closes a worker pool without terminating a thread that is inside native code or still
 * loading its module. Piscina's destroy() terminates at once; a worker stopped
 * mid-`InferenceSession.create` or mid-run (ONNX Runtime runs synchronously on its
 * thread) then has node-addon-api throw into a dying environment, and the whole process
 * aborts with `terminate called after throwing an instance of 'Napi::Error'`; one stopped
 * while loading its module aborts it the same way (announceLoaded). So this first waits
 * until every thread of a pool made by createPool has loaded, then close({force}) drops
 * queued tasks and waits for the running ones; past `graceMs` in all, the pool is
 * destroyed anyway.
 */
export async function closePool(pool: Piscina, graceMs: number): Promise<void> {
  closedPools.add(pool);
  // A span of time, not a date: the monotonic clock.
  const deadline = performance.now() + graceMs;
  const loaded = loadedThreads.get(pool);
  while (
    loaded &&
    performance.now() < deadline &&
    !pool.threads.every((t) => loaded.has(t.threadId))
  )
    await new Promise((r) => setTimeout(r, 10));
  try {
    await withTimeout(
      pool.close({ force: true }),
      Math.max(0, deadline - performance.now()),
      () => new Error('pool close timed out'),
    );
  } catch {
    await pool.destroy();
  }
}
