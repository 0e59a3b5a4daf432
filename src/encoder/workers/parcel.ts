import { MessageChannel, type MessagePort, receiveMessageOnPort } from 'node:worker_threads';

/**
 * A model input (pixel_values or mel features) on its way from a preprocessing thread to
 * the inference thread, parked in a MessagePort that the main thread only passes along.
 *
 * Why: an ArrayBuffer that enters the main thread's heap counts against V8's old-generation
 * limit as external memory ("allocated since the last mark-compact"), even if it is handed
 * on a moment later. A 1024×768 image's 18.8 MB of pixel_values crossed the main thread on
 * every encode, and the main isolate ran a full mark-compact of its ~32 MB heap every one
 * to three encodes (`--trace-gc`: 13–19 per 60 encodes, 20–30 core-ms each, most of the
 * service's overhead beyond preprocessing and the forward). Queued in a port, the buffer
 * stays a message in Node's native queue until the inference thread receives it: the
 * main isolate never attaches it.
 *
 * The main thread owns the receiving port until it transfers it to the inference thread;
 * if the request ends before that (released, expired, failed), `discard` frees the buffer
 * at once. An unclosed port would keep it until a collection happened to find the port,
 * and V8 does not know that memory is there. Once the forward has read the values, the
 * inference thread sends their buffer back the same way (`giveBack`), for the
 * preprocessing thread to reuse (input-pool.ts).
 */
export interface Parcel {
  /** The receiving end; the values are queued on it. */
  readonly port: MessagePort;
  /** Set once the port was handed to the inference thread (a port moves only once). */
  taken?: boolean;
}

/** The parcels this thread holds (see `hold`), and their count. */
const holding = new WeakSet<Parcel>();
let held = 0;

/**
 * Main thread: the parcel of a receiving port, counted as held until it is handed on
 * (`handOn`) or discarded. The count is epd_encoder_model_inputs_held: it drains to zero
 * when no request is between its preprocessing and its forward, and a parcel that leaked
 * (a buffer V8 cannot see) would show there.
 */
export function hold(port: MessagePort): Parcel {
  const parcel: Parcel = { port };
  holding.add(parcel);
  held++;
  return parcel;
}

/** Parcels held now (epd_encoder_model_inputs_held). */
export function parcelsHeld(): number {
  return held;
}

function settle(parcel: Parcel): void {
  if (holding.delete(parcel)) held--;
}

/** Main thread: the port to transfer to the inference thread; the parcel is no longer held. */
export function handOn(parcel: Parcel): MessagePort {
  parcel.taken = true;
  settle(parcel);
  return parcel.port;
}

/** A model input: the values themselves (in-process, retries) or a parcel holding them. */
export type ModelInput = Float32Array | Parcel;

export function isParcel(input: ModelInput): input is Parcel {
  return !ArrayBuffer.isView(input);
}

/** The two ends of a parcel: the producer gets `send`, the main thread keeps `receive`. */
export function parcelChannel(): { send: MessagePort; receive: MessagePort } {
  const { port1, port2 } = new MessageChannel();
  return { send: port1, receive: port2 };
}

/**
 * Producer side: moves `values` into the parcel (no copy). Returns what the reply carries
 * in their place: an empty array (the main thread puts its receiving end there). The
 * sending end stays open: the inference thread gives the buffer back through it once the
 * forward has read it (`giveBack`; the preprocessing thread's input-pool.ts reuses it).
 */
export function ship(port: MessagePort, values: Float32Array): Float32Array {
  port.postMessage(values, [values.buffer as ArrayBuffer]);
  return new Float32Array(0);
}

/**
 * Consumer side: the values, received from the parcel's port, which stays open for
 * `giveBack` (or `discard`). Only on a port that was never closed: Node 20's
 * receiveMessageOnPort on a port after its own close() crashed the process (segmentation
 * fault, reproduced in parcel.spec.ts's notes).
 */
export function unpack(input: ModelInput): Float32Array {
  if (!isParcel(input)) return input;
  const got = receiveMessageOnPort(input.port);
  if (!got) throw new Error('model input parcel is empty (never sent, or already received)');
  return got.message as Float32Array;
}

/**
 * Consumer side, once the values are read: their buffer goes back to the thread that made
 * it, to hold the next request's values (up to GIVE_BACK_MAX_BYTES), and the parcel is
 * closed. Values that came without a parcel (in-process callers, retries) are left to the
 * collector.
 */
export function giveBack(input: ModelInput, values: Float32Array): void {
  if (!isParcel(input)) return;
  if (values.buffer.byteLength <= GIVE_BACK_MAX_BYTES)
    input.port.postMessage(values, [values.buffer as ArrayBuffer]);
  input.port.close();
}

/**
 * The largest buffer given back: a max_pixels image's values (24 MB) fit. A larger one (a
 * many-image request, a video: 300 MB at the token cap) is not reused; sent back, it sat
 * in the preprocessing thread's port queue, out of any collector's sight, until that
 * thread's next request (RSS 444 MB above idle after a 26-frame video, measured), while the
 * inference thread's reclaimAfter frees it at once.
 */
export const GIVE_BACK_MAX_BYTES = 32 * 2 ** 20;

/** Frees a parcel that will not be unpacked (idempotent; harmless once it was handed on). */
export function discard(input: ModelInput | undefined): void {
  if (!input || !isParcel(input)) return;
  settle(input);
  input.port.close();
}
