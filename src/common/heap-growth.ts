import { setFlagsFromString } from 'node:v8';

/**
 * Sets how far every V8 heap of this process (the main thread's and the worker threads')
 * may grow past its live size before the next full collection: EPD_HEAP_GROWING_PERCENT.
 *
 * V8 counts the external memory a thread attached since its last mark-compact (every
 * ArrayBuffer that arrived: each staged embedding, 4 MB for a 1024×768 image in float32)
 * against that room, and starts marking once what is left is below its young generation's
 * capacity. With its own growth heuristic (~1.7× for a service that allocates little on
 * the JS heap) that left room for two or three embeddings: the main isolate marked its
 * ~32 MB heap every 2-4 encodes, 20-30 core-ms each (`--trace-gc`, 13-20 per 60 encodes),
 * which was most of the service's cost beyond preprocessing and the forward. At 200% it
 * marks every 12-20 encodes (measured 3-5 per 60). 0 leaves V8's heuristic in place.
 *
 * V8 reads the flag whenever it sizes a heap, so setting it at start-up is enough.
 */
export function setHeapGrowth(percent: number): void {
  if (percent > 0) setFlagsFromString(`--heap-growing-percent=${percent}`);
}
