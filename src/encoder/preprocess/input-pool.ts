import { type MessagePort, receiveMessageOnPort } from 'node:worker_threads';
import { GIVE_BACK_MAX_BYTES } from '../workers/parcel';
import { reclaimAfter } from '../workers/reclaim';
import { uninitializedFloat32 } from './patchify';

/**
 * A preprocessing thread's model-input buffers, reused: the inference thread sends each
 * request's pixel_values back through its parcel once the forward has read them (parcel.ts,
 * `giveBack`), and the next image is patchified into memory this thread already touched.
 *
 * Why: a fresh 4.8 MB buffer per 448² image (malloc'd, handed to another thread, freed
 * whenever that thread's collector got to it) cost page faults, cold caches and a scavenge
 * per encode. Measured per 448² encode: patchify 5.2 core-ms into fresh memory against 3.9
 * into memory reused after a forward-sized cache eviction; 134 page faults per encode
 * against the bare chain's 39.
 *
 * Bounds: buffers of at most GIVE_BACK_MAX_BYTES (32 MiB) each and MAX_FREE_BYTES (48 MiB)
 * in all wait here (the oldest go first), and MAX_AWAITING shipped parcels are watched for
 * their return (older ones are closed: a parcel the main thread discarded never comes
 * back). IDLE_MS after the last request the pool is emptied and the thread collects, so an
 * idle service holds none of it.
 */
const MAX_AWAITING = 8;
const MAX_FREE_BYTES = 48 * 2 ** 20;
const IDLE_MS = 10_000;

/** Sending ends of shipped parcels, oldest first: where buffers come back. */
const awaiting: MessagePort[] = [];
/** Returned buffers, ready for the next request. */
let free: ArrayBuffer[] = [];
let idle: NodeJS.Timeout | undefined;
const counts = { reused: 0, fresh: 0 };

/** Watches a shipped parcel's sending end for its buffer's return (see module notes). */
export function awaitReturn(port: MessagePort): void {
  awaiting.push(port);
  while (awaiting.length > MAX_AWAITING) awaiting.shift()!.close();
  touch();
}

/**
 * `length` float32 values to fill, every one of which the caller writes: a returned buffer
 * that fits (the smallest such), else fresh memory.
 */
export function inputBuffer(length: number): Float32Array {
  collect();
  touch();
  const bytes = length * 4;
  let best = -1;
  for (let i = 0; i < free.length; i++)
    if (free[i]!.byteLength >= bytes && (best < 0 || free[i]!.byteLength < free[best]!.byteLength))
      best = i;
  if (best < 0) {
    counts.fresh++;
    return uninitializedFloat32(length);
  }
  counts.reused++;
  const [buffer] = free.splice(best, 1);
  return new Float32Array(buffer!, 0, length);
}

export interface InputPoolStats {
  /** Requests whose values went into a buffer given back, and into fresh memory. */
  reused: number;
  fresh: number;
  /** Buffers waiting for a request, and their bytes. */
  free: number;
  freeBytes: number;
  /** Shipped parcels watched for their buffer's return. */
  awaiting: number;
}

/** Buffers reused and made fresh so far, and what waits now (tests, diagnosis). */
export function inputPoolStats(): InputPoolStats {
  collect();
  return {
    ...counts,
    free: free.length,
    freeBytes: freeBytes(),
    awaiting: awaiting.length,
  };
}

/** Takes in every buffer sent back so far; their parcels are done and closed. */
function collect(): void {
  for (let i = 0; i < awaiting.length;) {
    const port = awaiting[i]!;
    const back = receiveMessageOnPort(port);
    if (!back) {
      i++;
      continue;
    }
    awaiting.splice(i, 1);
    port.close();
    keep((back.message as Float32Array).buffer as ArrayBuffer);
  }
}

function keep(buffer: ArrayBuffer): void {
  if (buffer.byteLength > GIVE_BACK_MAX_BYTES) return;
  free.push(buffer);
  let bytes = freeBytes();
  while (bytes > MAX_FREE_BYTES) bytes -= free.shift()!.byteLength;
}

const freeBytes = () => free.reduce((n, b) => n + b.byteLength, 0);

/** (Re)starts the idle countdown; it does not keep the thread alive. */
function touch(): void {
  if (idle) idle.refresh();
  else idle = setTimeout(release, IDLE_MS).unref();
}

/** Idle: every buffer goes, parcels still out are let go, and the thread collects. */
export function releaseInputPool(): void {
  collect();
  const bytes = freeBytes();
  free = [];
  for (const port of awaiting.splice(0)) port.close();
  if (bytes > 0) reclaimAfter(bytes, 0);
}

function release(): void {
  idle = undefined;
  releaseInputPool();
}
