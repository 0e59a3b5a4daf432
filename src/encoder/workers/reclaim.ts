import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * Gives a worker thread's large buffers back to the OS soon after a big task.
 *
 * The pixel_values, decoded frames and model outputs of one request are external memory
 * (hundreds of MB) held by a handful of small JS objects. A worker's own V8 heap barely
 * grows, so its collector has no reason to run once the task is done, and those buffers
 * stayed resident until a later request happened to trigger a collection (measured: the
 * 300 MB input of a 15k-token forward held by the idle inference worker). So once a thread
 * has handled `thresholdBytes` of large buffers, it runs a full collection shortly after
 * its reply has been posted (the pools use `atomics: 'async'`, so an idle worker's event
 * loop does run), and a second one for what the first one's finalizers released (native
 * tensors let go of their buffers in a finalizer).
 */
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const THRESHOLD = 64 * 2 ** 20;
/** Long enough for piscina to have posted the reply (and moved its buffers out). */
const AFTER_REPLY_MS = 20;
let since = 0;

export function reclaimAfter(bytes: number, thresholdBytes = THRESHOLD): void {
  since += bytes;
  if (since < thresholdBytes) return;
  since = 0;
  setTimeout(() => {
    gc();
    setImmediate(gc);
  }, AFTER_REPLY_MS);
}
