import { CHANNELS, patchDim, type VisionGeometry } from '../../common/vision-geometry';

export interface Grid {
  t: number;
  h: number;
  w: number;
}

/**
 * Packs frames of interleaved RGB bytes (each `height × width`, sides multiples of
 * patch × merge) into the Qwen-VL flattened patches: rows in (t, h/m, w/m, m, m) order, so
 * that every m² consecutive rows form one merge group, and each row laid out as
 * (channel, temporal, patch, patch) values (1176 for 14-pixel patches, 1536 for 16),
 * normalised with the geometry's mean and std. An odd frame count repeats the last frame
 * (a still image is one frame, repeated). Equivalent to transformers' reshape +
 * transpose(0, 3, 6, 4, 7, 2, 1, 5, 8).
 */
export function patchify(
  frames: Uint8Array[],
  height: number,
  width: number,
  geometry: VisionGeometry,
  out?: Float32Array,
): { data: Float32Array; grid: Grid } {
  if (frames.length === 0) throw new Error('patchify needs at least one frame');
  return patcherFor(geometry).patchify(frames, height, width, out);
}

/** How many values patchify writes for `frames` frames of `height × width`: `out`'s length. */
export function patchValues(
  frames: number,
  height: number,
  width: number,
  geometry: VisionGeometry,
): number {
  const p = geometry.patchSize;
  const rows = Math.ceil(frames / geometry.temporalPatchSize) * (height / p) * (width / p);
  return rows * patchDim(geometry);
}

/** One patcher per geometry a process serves (a handful at most): its tables built once. */
const patchers = new Map<string, Patcher>();

function patcherFor(g: VisionGeometry): Patcher {
  const key = `${g.patchSize}/${g.mergeSize}/${g.temporalPatchSize}/${g.imageMean.join()}/${g.imageStd.join()}`;
  let p = patchers.get(key);
  if (!p) {
    if (g.temporalPatchSize !== 2)
      throw new Error(`the patch layout writes 2 frames per patch, not ${g.temporalPatchSize}`);
    p = new Patcher(g);
    patchers.set(key, p);
  }
  return p;
}

class Patcher {
  private readonly patch: number;
  private readonly merge: number;
  private readonly dim: number;
  /** Values in one channel's block of one temporal slot: patch². */
  private readonly block: number;
  private readonly r: Float32Array;
  private readonly g: Float32Array;
  private readonly b: Float32Array;

  constructor(geometry: VisionGeometry) {
    this.patch = geometry.patchSize;
    this.merge = geometry.mergeSize;
    this.dim = patchDim(geometry);
    this.block = this.patch * this.patch;
    [this.r, this.g, this.b] = luts(geometry);
  }

  patchify(
    frames: Uint8Array[],
    height: number,
    width: number,
    out?: Float32Array,
  ): { data: Float32Array; grid: Grid } {
    const { patch, merge, dim } = this;
    const gt = Math.ceil(frames.length / 2);
    const gh = height / patch;
    const gw = width / patch;
    const data = out ?? uninitializedFloat32(gt * gh * gw * dim);
    const rowStride = width * CHANNELS;
    let row = 0;
    for (let t = 0; t < gt; t++) {
      const f0 = frames[Math.min(t * 2, frames.length - 1)]!;
      const f1 = frames[Math.min(t * 2 + 1, frames.length - 1)]!;
      for (let hb = 0; hb < gh / merge; hb++) {
        for (let wb = 0; wb < gw / merge; wb++) {
          for (let mh = 0; mh < merge; mh++) {
            for (let mw = 0; mw < merge; mw++, row++) {
              const origin =
                (hb * merge + mh) * patch * rowStride + (wb * merge + mw) * patch * CHANNELS;
              if (f0 === f1) this.fillStill(data, row * dim, f0, origin, rowStride);
              else this.fillPatch(data, row * dim, f0, f1, origin, rowStride);
            }
          }
        }
      }
    }
    return { data, grid: { t: gt, h: gh, w: gw } };
  }

  /**
   * One row: the patch×patch pixels at `src`, read once, each written to its R, G and B
   * block in both temporal slots (channel-major: R t0, R t1, G t0, G t1, B t0, B t1). This
   * is the hot loop of image preprocessing; normalisation is a table lookup per channel.
   */
  private fillPatch(
    data: Float32Array,
    o: number,
    f0: Uint8Array,
    f1: Uint8Array,
    src: number,
    stride: number,
  ): void {
    const { patch, block, r: R, g: G, b: B } = this;
    for (let y = 0; y < patch; y++, src += stride, o += patch) {
      for (let x = 0, s = src; x < patch; x++, s += CHANNELS) {
        const q = o + x;
        data[q] = R[f0[s]!]!;
        data[q + block] = R[f1[s]!]!;
        data[q + 2 * block] = G[f0[s + 1]!]!;
        data[q + 3 * block] = G[f1[s + 1]!]!;
        data[q + 4 * block] = B[f0[s + 2]!]!;
        data[q + 5 * block] = B[f1[s + 2]!]!;
      }
    }
  }

  /**
   * fillPatch for a still image (or a repeated last frame): each channel's first temporal
   * block is written, then copied to the second with a native copy, three stores a pixel
   * instead of six (1036×756, median of 8 runs each: 12.2 against 13.7 ms).
   */
  private fillStill(
    data: Float32Array,
    o: number,
    frame: Uint8Array,
    src: number,
    stride: number,
  ): void {
    const { patch, block, r: R, g: G, b: B } = this;
    for (let y = 0; y < patch; y++) {
      const from = src + y * stride;
      const to = o + y * patch;
      for (let x = 0; x < patch; x++) {
        const s = from + x * CHANNELS;
        const q = to + x;
        data[q] = R[frame[s]!]!;
        data[q + 2 * block] = G[frame[s + 1]!]!;
        data[q + 4 * block] = B[frame[s + 2]!]!;
      }
    }
    data.copyWithin(o + block, o, o + block);
    data.copyWithin(o + 3 * block, o + 2 * block, o + 3 * block);
    data.copyWithin(o + 5 * block, o + 4 * block, o + 5 * block);
  }
}

/**
 * Every byte value normalised per channel as transformers computes it: rescale in float64
 * (v · (1/255)) cast to float32, then `(x − mean) / std` in float32 arithmetic
 * (image_transforms.rescale and normalize); so an image at the grid size comes out
 * bit-identical to the reference processor.
 */
function buildLuts(g: VisionGeometry): [Float32Array, Float32Array, Float32Array] {
  const f = Math.fround;
  const [r, gr, b] = [0, 1, 2].map((c) => {
    const mean = f(g.imageMean[c]!);
    const std = f(g.imageStd[c]!);
    return Float32Array.from({ length: 256 }, (_, v) => f(f(f(v * (1 / 255)) - mean) / std));
  });
  return [r!, gr!, b!];
}

/** One table set per mean and std a process serves (a handful: each model's image and video processors). */
const tables = new Map<string, [Float32Array, Float32Array, Float32Array]>();

/**
 * The normalisation tables of a geometry's mean and std, built once and keyed by value, so a
 * geometry made per request (a video's own mean and std) finds them: the patch layout's and
 * the tile writer's (tiles.ts) alike.
 */
export function luts(g: VisionGeometry): [Float32Array, Float32Array, Float32Array] {
  const key = `${g.imageMean.join()}/${g.imageStd.join()}`;
  let t = tables.get(key);
  if (!t) {
    t = buildLuts(g);
    tables.set(key, t);
  }
  return t;
}

/**
 * A Float32Array without the zero fill: every element is about to be written. A zeroed
 * multi-megabyte array costs a page fault per 4 KiB on each request (measured: ~1.5 ms of
 * the 448×448 path), while malloc'd memory is reused.
 */
export function uninitializedFloat32(length: number): Float32Array {
  return new Float32Array(Buffer.allocUnsafeSlow(length * 4).buffer, 0, length);
}
