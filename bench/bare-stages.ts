/**
 * The encode path's stages without the service, as encode-cost measures them: decode
 * (bytes → RGB), resize (to the smart-resize size, by the worker's rule), patchify, and the
 * bare ORT forward. Shared by the benchmark process and its child (chain-cost.ts).
 *
 * Patchify writes into one output kept across calls, as the service's preprocessing thread
 * writes into the buffer the inference thread gave back (input-pool.ts): the bare stages are
 * the least work the path can do, so that what the service adds shows as its overhead. A
 * fresh 18.8 MB output per 1024×768 image was not free in a process whose ORT session
 * shares its malloc arena: 880 page faults per image (about 3.7 core-ms, perf).
 */
import { InferenceSession } from 'onnxruntime-node';
import sharp from 'sharp';
import { referenceModelPaths } from '../src/config/model-paths';
import { modelInputs } from '../src/encoder/backend/model-inputs';
import { patchify } from '../src/encoder/preprocess/patchify';
import { loadBicubicResampler } from '../src/encoder/preprocess/resample';
import { DEFAULT_GEOMETRY, resizeFactor } from '../src/common/vision-geometry';
import { smartResize } from '../src/encoder/preprocess/smart-resize';
import { EXECUTION_PROVIDERS } from './common';

/** The vision session, as the service's inference thread opens it (2 intra-op threads). */
export function benchSession(): Promise<InferenceSession> {
  return InferenceSession.create(referenceModelPaths().vision, {
    executionProviders: EXECUTION_PROVIDERS,
    intraOpNumThreads: 2,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    enableCpuMemArena: false,
    extra: { session: { intra_op: { allow_spinning: '0' } } },
  });
}

export async function bareStages(file: Buffer, session: InferenceSession) {
  const meta = await sharp(file).metadata();
  const g = DEFAULT_GEOMETRY;
  const [h, w] = smartResize(meta.height, meta.width, 3136, 1003520, resizeFactor(g));
  const decode = () => sharp(file).rotate().toColourspace('srgb').removeAlpha().raw().toBuffer();
  const rgb = await decode();
  const resampler = await loadBicubicResampler();
  // The worker's rule: no resize at the grid size, libvips when both sides shrink, the
  // exact Pillow resampler when any side grows.
  const same = w === meta.width && h === meta.height;
  const shrink = w <= meta.width && h <= meta.height;
  const resize = () =>
    same
      ? rgb
      : shrink
        ? sharp(rgb, { raw: { width: meta.width, height: meta.height, channels: 3 } })
            .resize(w, h, { fit: 'fill', kernel: 'cubic' })
            .raw()
            .toBuffer()
        : resampler.resize(rgb, meta.width, meta.height, w, h);
  const resized = await resize();
  const { data, grid } = patchify([resized], h, w, g);
  const kept = new Float32Array(data.length);
  const pix = () => patchify([resized], h, w, g, kept);
  const feeds = modelInputs(session, 'vision', data, [[grid.t, grid.h, grid.w]]);
  const forward = () => session.run(feeds);
  /** What the service does with the same file: decode, resize, patchify, forward. */
  const chain = async () => {
    await decode();
    await resize();
    const { data: values } = pix();
    return session.run(modelInputs(session, 'vision', values, [[grid.t, grid.h, grid.w]]));
  };
  const resizeKind = same
    ? 'none: already the grid size'
    : shrink
      ? 'libvips reduce'
      : 'exact Pillow bicubic';
  return { data, grid, decode, resize, resizeKind, pix, forward, chain };
}
