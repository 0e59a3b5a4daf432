import { CHANNELS, MERGE, PATCH_DIM, PATCH_SIZE, TEMPORAL_PATCH } from '../pipeline/model-contract';

/** OpenAI CLIP normalisation, as Qwen2-VL's image processor uses. */
export const IMAGE_MEAN = [0.48145466, 0.4578275, 0.40821073] as const;
export const IMAGE_STD = [0.26862954, 0.26130258, 0.27577711] as const;

export interface Grid {
  t: number;
  h: number;
  w: number;
}

/**
 * Packs frames of interleaved RGB bytes (each `height × width`, sides multiples of 28)
 * into Qwen2-VL's flattened patches: rows in (t, h/2, w/2, 2, 2) order, so that every 4
 * consecutive rows form one 2×2 merge group, and each row laid out as
 * (channel, temporal, 14, 14) = 1176 values, normalised with the CLIP mean and std.
 * An odd frame count repeats the last frame (a still image is one frame, repeated).
 * Equivalent to transformers' reshape + transpose(0, 3, 6, 4, 7, 2, 1, 5, 8).
 */
export function patchify(
  frames: Uint8Array[],
  height: number,
  width: number,
  out?: Float32Array,
): { data: Float32Array; grid: Grid } {
  if (frames.length === 0) throw new Error('patchify needs at least one frame');
  const gt = Math.ceil(frames.length / TEMPORAL_PATCH);
  const gh = height / PATCH_SIZE;
  const gw = width / PATCH_SIZE;
  const rows = gt * gh * gw;
  const data = out ?? new Float32Array(rows * PATCH_DIM);
  const rowStride = width * CHANNELS;
  let row = 0;
  for (let t = 0; t < gt; t++) {
    const f0 = frames[Math.min(t * TEMPORAL_PATCH, frames.length - 1)]!;
    const f1 = frames[Math.min(t * TEMPORAL_PATCH + 1, frames.length - 1)]!;
    for (let hb = 0; hb < gh / MERGE; hb++) {
      for (let wb = 0; wb < gw / MERGE; wb++) {
        for (let mh = 0; mh < MERGE; mh++) {
          for (let mw = 0; mw < MERGE; mw++, row++) {
            const origin =
              (hb * MERGE + mh) * PATCH_SIZE * rowStride +
              (wb * MERGE + mw) * PATCH_SIZE * CHANNELS;
            for (let c = 0; c < CHANNELS; c++) {
              const o = row * PATCH_DIM + c * TEMPORAL_PATCH * BLOCK;
              // A still image (or a repeated last frame) fills both temporal slots alike.
              if (f1 === f0) fillBoth(data, o, f0, origin + c, rowStride, LUTS[c]!);
              else {
                fillOne(data, o, f0, origin + c, rowStride, LUTS[c]!);
                fillOne(data, o + BLOCK, f1, origin + c, rowStride, LUTS[c]!);
              }
            }
          }
        }
      }
    }
  }
  return { data, grid: { t: gt, h: gh, w: gw } };
}

const BLOCK = PATCH_SIZE * PATCH_SIZE;

// The two fills below are the hot loop of image preprocessing (measured: ~1.2 ms for a
// 448x448 image); normalisation is a table lookup per channel.

function fillOne(
  data: Float32Array,
  o: number,
  frame: Uint8Array,
  src: number,
  stride: number,
  lut: Float32Array,
): void {
  for (let y = 0; y < PATCH_SIZE; y++, src += stride) {
    for (let x = 0, s = src; x < PATCH_SIZE; x++, s += CHANNELS) data[o++] = lut[frame[s]!]!;
  }
}

function fillBoth(
  data: Float32Array,
  o: number,
  frame: Uint8Array,
  src: number,
  stride: number,
  lut: Float32Array,
): void {
  for (let y = 0; y < PATCH_SIZE; y++, src += stride) {
    for (let x = 0, s = src; x < PATCH_SIZE; x++, s += CHANNELS, o++) {
      const v = lut[frame[s]!]!;
      data[o] = v;
      data[o + BLOCK] = v;
    }
  }
}

/** (byte / 255 - mean) / std for every byte value, per channel. */
const LUTS = [0, 1, 2].map((c) =>
  Float32Array.from({ length: 256 }, (_, v) => (v / 255 - IMAGE_MEAN[c]!) / IMAGE_STD[c]!),
);
