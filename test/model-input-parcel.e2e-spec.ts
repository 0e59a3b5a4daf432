import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { getHeapStatistics } from 'node:v8';
import sharp from 'sharp';
import { OnnxWorkerBackend } from '../src/encoder/backend/onnx-worker.backend';
import preprocessInProcess from '../src/encoder/preprocess/preprocess.worker';
import {
  forwardPart,
  type PreprocessOk,
  type PreprocessResult,
} from '../src/encoder/preprocess/preprocess.types';
import { isParcel, parcelsHeld } from '../src/encoder/workers/parcel';
import { encodeThreads } from './support/encode-threads';
import { DEFAULT_GEOMETRY } from '../src/common/vision-geometry';

/**
 * main-thread-gc-from-model-inputs: every encode's pixel_values (18.8 MB for a 1024×768
 * image) were transferred from a preprocessing thread to the main thread, then on to the
 * inference thread. Each arrival counted as main-thread external memory, which V8 weighs
 * against the room left before its next full collection. They now travel in a parcel (a
 * MessagePort the main thread only passes along): the main thread's external memory does
 * not move, and the inference thread gets exactly the values. Real worker threads and
 * ONNX Runtime.
 */
describe('model inputs bypass the main thread (e2e, real worker threads)', () => {
  const { config, preprocessor, backend, scheduler, close, job } = encodeThreads();

  afterAll(close);

  /** A noisy photo-sized image: the values differ everywhere. */
  const photo = (w: number, h: number) =>
    sharp(randomBytes(w * h * 3), { raw: { width: w, height: h, channels: 3 } })
      .png()
      .toBuffer();

  const submit = (reqId: string, pre: PreprocessOk) =>
    scheduler.submit(job(reqId, pre, { fusable: false }));

  it('hands out a parcel, and the main thread never attaches the 18.8 MB of pixel_values', async () => {
    await backend.info();
    const file = await photo(1024, 768);
    const before = getHeapStatistics().external_memory;
    const pre = await preprocessor.run('image', [file], 128);
    const grown = getHeapStatistics().external_memory - before;
    if (!pre.ok) throw new Error(pre.message);
    expect(pre.rows * 1176 * 4).toBe(18_797_184); // what used to arrive here
    expect(grown).toBeLessThan(2 ** 20);
    expect(isParcel(pre.data)).toBe(true);
    expect(parcelsHeld()).toBe(1); // epd_encoder_model_inputs_held
    const result = await submit('parcel', pre);
    expect(result.output.tokens).toBe(999);
    expect(parcelsHeld()).toBe(0);
  });

  /** The task the Preprocessor gives its thread, for the in-process path. */
  const taskOf = (file: Buffer) => ({
    modality: 'image' as const,
    items: [file],
    geometry: DEFAULT_GEOMETRY,
    minPixels: config.encoder.minPixels,
    maxPixels: config.encoder.maxPixels,
    maxVideoFrames: config.encoder.maxVideoFrames,
    maxDecodedPixels: config.encoder.maxDecodedPixels,
    nMels: 128,
  });

  const okOf = (pre: PreprocessResult) => {
    if (!pre.ok) throw new Error(pre.message);
    return pre;
  };

  it('the inference thread gets exactly the values: the same embedding as from in-process preprocessing', async () => {
    const file = await photo(448, 336);
    const [viaParcel, inProcess] = await Promise.all([
      preprocessor.run('image', [file], 128),
      preprocessInProcess(taskOf(file)),
    ]);
    if (!viaParcel.ok || !inProcess.ok) throw new Error('preprocessing failed');
    expect(isParcel(viaParcel.data)).toBe(true);
    expect(isParcel(inProcess.data)).toBe(false);
    const [a, b] = await Promise.all([submit('a', viaParcel), submit('b', inProcess)]);
    expect(a.output.tokens).toBe(b.output.tokens);
    expect(Buffer.from(a.output.data.buffer).equals(Buffer.from(b.output.data.buffer))).toBe(true);
  });

  it("gives each buffer back after the forward: a smaller image's values go into it, exactly", async () => {
    await submit('big', okOf(await preprocessor.run('image', [await photo(640, 480)], 128)));
    const before = await preprocessor.inputPool();
    expect(before.free).toBeGreaterThanOrEqual(1); // 640x480's pixel_values, given back
    const file = await photo(336, 224);
    const pre = okOf(await preprocessor.run('image', [file], 128));
    const after = await preprocessor.inputPool();
    expect(after.reused).toBe(before.reused + 1);
    expect(after.fresh).toBe(before.fresh);
    const inProcess = okOf(await preprocessInProcess(taskOf(file)));
    const [a, b] = await Promise.all([submit('reused', pre), submit('own', inProcess)]);
    expect(Buffer.from(a.output.data.buffer).equals(Buffer.from(b.output.data.buffer))).toBe(true);
  });

  it('a forward refused at shutdown frees its parcel at once (503, no thread revived)', async () => {
    const closed = new OnnxWorkerBackend(config);
    await closed.onModuleDestroy();
    const pre = await preprocessor.run('image', [await photo(56, 56)], 128);
    if (!pre.ok || !isParcel(pre.data)) throw new Error('no parcel');
    const freed = once(pre.data.port, 'close');
    // piscina would start a fresh thread for a task given to a destroyed pool.
    await expect(
      closed.forward({ kind: 'vision', parts: [forwardPart(pre)], dtype: 'float32' }),
    ).rejects.toMatchObject({ code: 503, message: 'encoder shutting down' });
    await freed;
    const threads = (closed as unknown as { pool: { threads: unknown[] } }).pool.threads;
    expect(threads).toHaveLength(0);
  });

  it('drains: nothing queued, nothing running, no parcel held', () => {
    expect(scheduler.stats()).toMatchObject({ queued: 0, running: false });
    expect(parcelsHeld()).toBe(0);
  });
});
