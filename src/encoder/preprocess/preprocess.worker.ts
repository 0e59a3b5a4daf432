import sharp from 'sharp';
import { PATCH_DIM } from '../backend/reference-models';
import { moveOut } from '../workers/transfer';
import { audioFeatures } from './audio';
import { patchify } from './patchify';
import type { PreprocessResult, PreprocessTask } from './preprocess.types';
import { SmartResizeError, smartResize, tokensForGrid } from './smart-resize';

// Runs in a worker thread (piscina): decode, orient, resize and patchify never block the
// main event loop. sharp's own libvips threads do the pixel work below.
sharp.cache(false);

class StageError extends Error {
  constructor(
    readonly stage: 'load' | 'process',
    readonly itemIndex: number,
    message: string,
  ) {
    super(message);
  }
}

interface Decoded {
  width: number;
  height: number;
  frames: number;
}

/** Width/height as displayed, i.e. after EXIF orientation. */
async function probe(buf: Uint8Array, index: number, animated: boolean): Promise<Decoded> {
  let meta: sharp.Metadata;
  try {
    meta = await sharp(buf, { animated }).metadata();
  } catch (err) {
    throw new StageError('load', index, (err as Error).message);
  }
  const frames = animated ? (meta.pages ?? 1) : 1;
  const rawHeight = animated && meta.pageHeight ? meta.pageHeight : (meta.height ?? 0);
  const rawWidth = meta.width ?? 0;
  const swap = (meta.orientation ?? 1) >= 5;
  return { width: swap ? rawHeight : rawWidth, height: swap ? rawWidth : rawHeight, frames };
}

/** RGB bytes of every frame, EXIF-oriented, alpha dropped, resized (bicubic) to h × w. */
async function rgbFrames(
  buf: Uint8Array,
  index: number,
  animated: boolean,
  h: number,
  w: number,
): Promise<Uint8Array[]> {
  try {
    const { data, info } = await sharp(buf, { animated })
      .rotate()
      .toColourspace('srgb')
      .removeAlpha()
      .resize(w, h, { fit: 'fill', kernel: 'cubic' })
      .raw()
      .toBuffer({ resolveWithObject: true });
    const frameBytes = w * h * 3;
    if (info.channels !== 3 || data.length % frameBytes !== 0) {
      throw new Error(`unexpected decoded layout ${info.width}x${info.height}x${info.channels}`);
    }
    const out: Uint8Array[] = [];
    for (let o = 0; o < data.length; o += frameBytes) out.push(data.subarray(o, o + frameBytes));
    return out;
  } catch (err) {
    throw new StageError('load', index, (err as Error).message);
  }
}

function resize(d: Decoded, task: PreprocessTask, index: number): [number, number] {
  try {
    return smartResize(d.height, d.width, task.minPixels, task.maxPixels);
  } catch (err) {
    if (err instanceof SmartResizeError) throw new StageError('process', index, err.message);
    throw err;
  }
}

function pick<T>(frames: T[], max: number): T[] {
  if (frames.length <= max) return frames;
  return Array.from({ length: max }, (_, i) => frames[Math.floor((i * frames.length) / max)]!);
}

async function images(task: PreprocessTask): Promise<PreprocessResult> {
  const parts: { data: Float32Array; grid: [number, number, number] }[] = [];
  for (const [i, buf] of task.items.entries()) {
    const d = await probe(buf, i, false);
    const [h, w] = resize(d, task, i);
    const frames = await rgbFrames(buf, i, false, h, w);
    const { data, grid } = patchify(frames.slice(0, 1), h, w);
    parts.push({ data, grid: [grid.t, grid.h, grid.w] });
  }
  return pack(parts);
}

/** A video request's items are its frames in order; an animated image contributes all of its frames. */
async function video(task: PreprocessTask): Promise<PreprocessResult> {
  const first = await probe(task.items[0]!, 0, true);
  const [h, w] = resize(first, task, 0);
  let frames: Uint8Array[] = [];
  for (const [i, buf] of task.items.entries())
    frames.push(...(await rgbFrames(buf, i, true, h, w)));
  frames = pick(frames, task.maxVideoFrames);
  const { data, grid } = patchify(frames, h, w);
  return pack([{ data, grid: [grid.t, grid.h, grid.w] }]);
}

/** One request's items packed back to back (a single item is used as is, without a copy). */
function concat(parts: Float32Array[]): Float32Array {
  if (parts.length === 1) return parts[0]!;
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

function pack(parts: { data: Float32Array; grid: [number, number, number] }[]): PreprocessResult {
  const data = concat(parts.map((p) => p.data));
  const rows = data.length / PATCH_DIM;
  const grids = parts.map((p) => p.grid);
  const tokens = grids.reduce((n, [t, h, w]) => n + tokensForGrid(t, h, w), 0);
  return { ok: true, kind: 'vision', data, rows, grids, tokens, ms: 0 };
}

function audio(task: PreprocessTask): PreprocessResult {
  const feats = task.items.map((buf, i) => {
    try {
      return audioFeatures(buf);
    } catch (err) {
      throw new StageError('load', i, (err as Error).message);
    }
  });
  const data = concat(feats.map((f) => f.data));
  const rows = feats.reduce((n, f) => n + f.frames, 0);
  return { ok: true, kind: 'audio', data, rows, grids: [], tokens: rows, ms: 0 };
}

export default async function preprocess(task: PreprocessTask): Promise<PreprocessResult> {
  const started = performance.now();
  try {
    const result =
      task.modality === 'image'
        ? await images(task)
        : task.modality === 'video'
          ? await video(task)
          : audio(task);
    if (!result.ok) return result;
    result.ms = performance.now() - started;
    return moveOut(result, [result.data.buffer]);
  } catch (err) {
    if (err instanceof StageError) {
      return { ok: false, stage: err.stage, itemIndex: err.itemIndex, message: err.message };
    }
    return { ok: false, stage: 'process', itemIndex: 0, message: (err as Error).message };
  }
}
