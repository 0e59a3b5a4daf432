import type Piscina from 'piscina';
import { withTimeout } from '../../common/timeout';

/**
 * Closes a worker pool without terminating a thread that is inside native code. Piscina's
 * destroy() terminates at once; a worker stopped mid-`InferenceSession.create` or mid-run
 * (ONNX Runtime runs synchronously on its thread) then has node-addon-api throw into a
 * dying environment, and the whole process aborts with `terminate called after throwing
 * an instance of 'Napi::Error'`. close({force}) drops queued tasks and waits for the
 * running ones; past `graceMs` the pool is destroyed anyway.
 */
export async function closePool(pool: Piscina, graceMs: number): Promise<void> {
  try {
    await withTimeout(
      pool.close({ force: true }),
      graceMs,
      () => new Error('pool close timed out'),
    );
  } catch {
    await pool.destroy();
  }
}
