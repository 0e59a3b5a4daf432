import sharp from 'sharp';
import {
  patchDim,
  resizeFactor,
  tileCount,
  tileGrid,
  tiledCanvas,
  tokensForGrid,
  type VideoBounds,
  type VisionGeometry,
} from '../../common/vision-geometry';
import { reclaimAfter } from '../workers/reclaim';
import { moveOut } from '../workers/move-out';
import { ship } from '../workers/parcel';
import { pack } from '../workers/pack';
import { AudioDecodeError } from '../../media/audio-decode';
import { audioInfo } from '../../media/audio-decode';
import { audioFeatures, audioTokens, audioWindows } from './audio';
import { MEL_FRAMES } from './whisper-mel';
import { patchValues, patchify } from './patchify';
import { writeTile } from './tiles';
import { sampleIndices } from '../../common/frame-sampling';
import { awaitReturn, inputBuffer, inputPoolStats, type InputPoolStats } from './input-pool';
import { StageError, probe, rgbFrame, type Decoded } from './decode-frame';
import type {
  PlanResult,
  PreprocessFailed,
  PreprocessResult,
  PreprocessTask,
} from './preprocess.types';
import { SmartResizeError, cappedVideoPixels, smartResize, videoSmartResize } from './smart-resize';
import { announceLoaded } from '../workers/close-pool';

/** The values themselves (an empty array once shipped in the task's parcel). */
type Produced = PreprocessResult<Float32Array>;

// Runs in a worker thread (piscina): decode, orient, resize and patchify never block the
// main event loop. sharp's own libvips threads do the pixel work below.
sharp.cache(false);

/**
 * The size an image is resized to: smart resize for the Qwen-VL families; for a tiling
 * family, the tile arrangement's canvas (rows × tile, columns × tile).
 */
function resize(d: Decoded, task: PreprocessTask, index: number): [number, number] {
  const tiling = task.geometry.tiling;
  if (tiling) {
    const { cols, rows } = tiledCanvas(d.height, d.width, tiling);
    return [rows * tiling.size, cols * tiling.size];
  }
  try {
    return smartResize(
      d.height,
      d.width,
      task.minPixels,
      task.maxPixels,
      resizeFactor(task.geometry),
    );
  } catch (err) {
    if (err instanceof SmartResizeError) throw new StageError('process', index, err.message);
    throw err;
  }
}

/** A tiling family's tiles for an image resized to its canvas of `h × w`. */
function tilesOf(g: VisionGeometry, h: number, w: number): number {
  const t = g.tiling!;
  return tileCount(w / t.size, h / t.size, t);
}

const tokensOf = (g: VisionGeometry, frames: number, h: number, w: number) =>
  g.tiling
    ? tokensForGrid(...tileGrid(tilesOf(g, h, w), g), g.mergeSize)
    : tokensForGrid(
        Math.ceil(frames / g.temporalPatchSize),
        h / g.patchSize,
        w / g.patchSize,
        g.mergeSize,
      );

/**
 * Every image of the request patchified straight into one array, sized from the headers:
 * no per-image arrays and no concatenation (the 13-image request used to hold both,
 * ~600 MB at once, for 300 MB of output).
 */
async function images(task: PreprocessTask): Promise<Produced> {
  let sizes = task.sizes;
  if (sizes?.length !== task.items.length) {
    sizes = [];
    for (const [i, buf] of task.items.entries())
      sizes.push(resize(await probe(buf, i, false), task, i));
  }
  const g = task.geometry;
  if (g.tiling) return tiledImages(task, sizes);
  const values = sizes.reduce((n, [h, w]) => n + patchValues(1, h, w, g), 0);
  const data = inputBuffer(values); // each image's rows are all written
  const grids: [number, number, number][] = [];
  let offset = 0;
  for (const [i, buf] of task.items.entries()) {
    const [h, w] = sizes[i]!;
    const frame = await rgbFrame(buf, i, 0, h, w, task.maxDecodedPixels);
    const length = patchValues(1, h, w, g);
    const { grid } = patchify([frame], h, w, g, data.subarray(offset, offset + length));
    grids.push([grid.t, grid.h, grid.w]);
    offset += length;
  }
  return packed(data, grids, g);
}

/**
 * A tiling family's images (InternVL): each resized to its canvas and cut into tiles, row by
 * row, then, with more than one tile, the thumbnail (the whole image resized to one tile),
 * as transformers' GotOcr2ImageProcessor.crop_image_to_patches orders them. Every tile is
 * one row of the model input; each image's grid is `[tiles, size / patch, size / patch]`.
 */
async function tiledImages(task: PreprocessTask, sizes: [number, number][]): Promise<Produced> {
  const g = task.geometry;
  const size = g.tiling!.size;
  const dim = patchDim(g);
  const counts = sizes.map(([h, w]) => tilesOf(g, h, w));
  const data = inputBuffer(counts.reduce((n, c) => n + c, 0) * dim); // every tile is written
  const grids: [number, number, number][] = [];
  let offset = 0;
  for (const [i, buf] of task.items.entries()) {
    const [h, w] = sizes[i]!;
    const canvas = await rgbFrame(buf, i, 0, h, w, task.maxDecodedPixels);
    for (let top = 0; top < h; top += size)
      for (let left = 0; left < w; left += size, offset += dim)
        writeTile(canvas, w, top, left, g, data, offset);
    if (counts[i]! > (h / size) * (w / size)) {
      const thumbnail = await rgbFrame(buf, i, 0, size, size, task.maxDecodedPixels);
      writeTile(thumbnail, size, 0, 0, g, data, offset);
      offset += dim;
    }
    grids.push(tileGrid(counts[i]!, g));
  }
  return packed(data, grids, g);
}

/**
 * The frames of a video request: its items in order, an animated item contributing each
 * of its pages, sampled evenly down to EPD_MAX_VIDEO_FRAMES. Every frame is resized to
 * the first one's smart-resized size.
 */
async function videoFrames(task: PreprocessTask): Promise<{
  h: number;
  w: number;
  frames: { item: number; page: number; pixels: number }[];
  total: number;
}> {
  const probes: Decoded[] = [];
  for (const [i, buf] of task.items.entries()) probes.push(await probe(buf, i, true));
  const total = probes.reduce((n, d) => n + d.frames, 0);
  const frames: { item: number; page: number; pixels: number }[] = [];
  let item = 0;
  let first = 0; // global index of the item's first frame
  for (const index of sampleIndices(total, task.maxVideoFrames)) {
    while (index >= first + probes[item]!.frames) first += probes[item++]!.frames;
    const d = probes[item]!;
    frames.push({ item, page: index - first, pixels: d.width * d.height });
  }
  const tiling = task.geometry.tiling;
  const [h, w] = tiling
    ? [tiling.size, tiling.size] // InternVL: each frame is one tile
    : task.video
      ? videoResize(probes[0]!, frames.length, task, task.video)
      : resize(probes[0]!, task, 0);
  return { h, w, frames, total };
}

/**
 * A video processor with bounds of its own (Qwen3-VL): its smart resize counts every kept
 * frame against them (capped per frame when the checkpoint says so).
 */
function videoResize(
  d: Decoded,
  frames: number,
  task: PreprocessTask,
  v: VideoBounds,
): [number, number] {
  const g = task.geometry;
  const factor = resizeFactor(g);
  const max = v.capPixelsPerFrame
    ? cappedVideoPixels(frames, factor, v.minPixels, v.maxPixels)
    : v.maxPixels;
  try {
    return videoSmartResize(
      frames,
      d.height,
      d.width,
      g.temporalPatchSize,
      factor,
      v.minPixels,
      max,
    );
  } catch (err) {
    if (err instanceof SmartResizeError) throw new StageError('process', 0, err.message);
    throw err;
  }
}

/** The geometry a video is patchified with: the model's, with its video processor's mean/std. */
const videoGeometry = (task: PreprocessTask): VisionGeometry =>
  task.video
    ? { ...task.geometry, imageMean: task.video.imageMean, imageStd: task.video.imageStd }
    : task.geometry;

/**
 * A tiling family's video (InternVL's video processor): every kept frame resized to one tile,
 * no tiling and no thumbnail, normalised as the video processor says; the grid is
 * `[frames, size / patch, size / patch]`, 256 tokens a frame.
 */
async function tiledVideo(task: PreprocessTask): Promise<Produced> {
  if (!task.video) throw new StageError('process', 0, 'this model has no video processor here');
  const g = videoGeometry(task);
  const size = g.tiling!.size;
  const dim = patchDim(g);
  const { frames } = await videoFrames(task);
  const data = inputBuffer(frames.length * dim);
  for (const [k, f] of frames.entries()) {
    const rgb = await rgbFrame(
      task.items[f.item]!,
      f.item,
      f.page,
      size,
      size,
      task.maxDecodedPixels,
    );
    writeTile(rgb, size, 0, 0, g, data, k * dim);
  }
  return packed(data, [tileGrid(frames.length, g)], g);
}

async function video(task: PreprocessTask): Promise<Produced> {
  if (task.geometry.tiling) return tiledVideo(task);
  const { h, w, frames } = await videoFrames(task);
  const rgb: Uint8Array[] = [];
  for (const f of frames)
    rgb.push(await rgbFrame(task.items[f.item]!, f.item, f.page, h, w, task.maxDecodedPixels));
  const g = videoGeometry(task);
  const { data, grid } = patchify(rgb, h, w, g, inputBuffer(patchValues(rgb.length, h, w, g)));
  return packed(data, [[grid.t, grid.h, grid.w]], g);
}

/** The cost of a request from its headers alone (see MediaPlan); decodes nothing. */
async function planMedia(task: PreprocessTask): Promise<PlanResult> {
  const plan = {
    ok: true as const,
    tokens: 0,
    itemTokens: [] as number[],
    itemSizes: [] as [number, number][],
    decodedPixels: 0,
    sourceFrames: 0,
    keptFrames: 0,
    audioSeconds: 0,
    decodedAudioBytes: 0,
    inputBytes: 0,
  };
  const float32 = Float32Array.BYTES_PER_ELEMENT;
  if (task.modality === 'audio') {
    for (const [i, buf] of task.items.entries()) {
      let info;
      try {
        info = audioInfo(buf);
      } catch (err) {
        throw new StageError('load', i, (err as Error).message);
      }
      plan.itemTokens.push(audioTokens(info.frames, info.sampleRate));
      plan.tokens += plan.itemTokens[i]!;
      plan.audioSeconds += info.frames / info.sampleRate;
      plan.decodedAudioBytes += info.frames * info.channels * 4;
      plan.inputBytes +=
        audioWindows(info.frames, info.sampleRate) * task.nMels * MEL_FRAMES * float32;
    }
  } else if (task.modality === 'image') {
    for (const [i, buf] of task.items.entries()) {
      const d = await probe(buf, i, false);
      const [h, w] = resize(d, task, i);
      plan.itemSizes.push([h, w]);
      plan.itemTokens.push(tokensOf(task.geometry, 1, h, w));
      plan.tokens += plan.itemTokens[i]!;
      plan.decodedPixels += d.width * d.height;
      plan.inputBytes +=
        (task.geometry.tiling
          ? tilesOf(task.geometry, h, w) * patchDim(task.geometry)
          : patchValues(1, h, w, task.geometry)) * float32;
    }
  } else {
    const { h, w, frames, total } = await videoFrames(task);
    const g = task.geometry;
    plan.tokens = g.tiling
      ? tokensForGrid(...tileGrid(frames.length, g), g.mergeSize)
      : tokensOf(g, frames.length, h, w);
    plan.itemTokens = [plan.tokens];
    plan.sourceFrames = total;
    plan.keptFrames = frames.length;
    plan.decodedPixels = frames.reduce((n, f) => n + f.pixels, 0);
    plan.inputBytes =
      (g.tiling ? frames.length * patchDim(g) : patchValues(frames.length, h, w, g)) * float32;
  }
  return plan;
}

/** Named piscina entry: `pool.run(task, { name: 'plan' })`. */
export async function plan(task: PreprocessTask): Promise<PlanResult> {
  try {
    return await planMedia(task);
  } catch (err) {
    return failure(err);
  }
}

/** Named piscina entry: this thread's model-input buffers (input-pool.ts). */
export function inputPool(): InputPoolStats {
  return inputPoolStats();
}

function failure(err: unknown): PreprocessFailed {
  if (err instanceof StageError)
    return { ok: false, stage: err.stage, itemIndex: err.itemIndex, message: err.message };
  if (err instanceof AudioDecodeError)
    return { ok: false, stage: 'load', itemIndex: 0, message: err.message };
  return { ok: false, stage: 'process', itemIndex: 0, message: (err as Error).message };
}

function packed(
  data: Float32Array,
  grids: [number, number, number][],
  g: VisionGeometry,
): Produced {
  const rows = data.length / patchDim(g);
  const tokens = grids.reduce((n, [t, h, w]) => n + tokensForGrid(t, h, w, g.mergeSize), 0);
  return {
    ok: true,
    kind: 'vision',
    data,
    rows,
    grids,
    featureLens: [],
    windowTokens: [],
    tokens,
    ms: 0,
  };
}

async function audio(task: PreprocessTask): Promise<Produced> {
  const feats = [];
  for (const [i, buf] of task.items.entries()) {
    try {
      feats.push(await audioFeatures(buf, task.nMels));
    } catch (err) {
      throw new StageError('load', i, (err as Error).message);
    }
  }
  const windowTokens = feats.flatMap((f) => f.windowTokens);
  const tokens = windowTokens.reduce((n, t) => n + t, 0);
  // Under 20 ms (3 mel frames) the tower has no output row to give.
  if (tokens === 0) throw new StageError('process', 0, 'audio is too short: under 20 ms');
  return {
    ok: true,
    kind: 'audio',
    data: pack(feats.map((f) => f.data)),
    rows: windowTokens.length,
    grids: [],
    featureLens: feats.flatMap((f) => f.frames),
    windowTokens,
    tokens,
    ms: 0,
  };
}

export default async function preprocess(task: PreprocessTask): Promise<Produced> {
  const started = performance.now();
  let shipped = false;
  try {
    const result =
      task.modality === 'image'
        ? await images(task)
        : task.modality === 'video'
          ? await video(task)
          : await audio(task);
    if (!result.ok) return result;
    result.ms = performance.now() - started;
    // Decoded frames are about a quarter of the float pixel_values handed back.
    reclaimAfter(task.items.reduce((n, b) => n + b.byteLength, 0) + result.data.byteLength * 1.25);
    if (!task.parcel) return moveOut(result, [result.data.buffer]);
    const data = ship(task.parcel, result.data);
    // The buffer comes back through this end after the forward (input-pool.ts).
    awaitReturn(task.parcel);
    shipped = true;
    return { ...result, data };
  } catch (err) {
    return failure(err);
  } finally {
    if (!shipped) task.parcel?.close(); // nothing shipped: this end is done
  }
}

// Every import above is loaded: this thread may now be terminated safely.
announceLoaded();
