import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * Gives a worker thread's large buffers back to the OS soon after a big task.
 *
 * The pixel_values, decoded frames and model outputs of one request are external memory
 * (hundreds of MB) held by a handful of small JS objects. A worker's own V8 heap barely
 * grows, so its collector has no reason to run once the task is done, and those buffers
 * stayed resident until a later request happened to trigger a collection (measured: the
 * 300 MB input of a 15k-token forward held by the idle inference worker). So after a task
 * that handled at least `thresholdBytes`, the thread runs a full collection shortly after
 * its reply has been posted (the pools use `atomics: 'async'`, so an idle worker's event
 * loop does run), and a second one for what the first one's finalizers released.
 *
 * Only large tasks: counting bytes over many small ones made the workers collect every
 * dozen 448² images, which cost 20% of encode throughput (73 vs 92 images/s, measured).
 * Small tasks' garbage is left to V8's own external-memory heuristics.
 */
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const THRESHOLD = 64 * 2 ** 20;
/** Long enough for piscina to have posted the reply (and moved its buffers out). */
const AFTER_REPLY_MS = 20;
let pending = false;

export function reclaimAfter(taskBytes: number, thresholdBytes = THRESHOLD): void {
  if (taskBytes < thresholdBytes || pending) return;
  pending = true;
  setTimeout(() => {
    gc();
    setImmediate(() => {
      gc();
      pending = false;
    });
  }, AFTER_REPLY_MS);
}
