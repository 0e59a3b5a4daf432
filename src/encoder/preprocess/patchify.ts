import {
  CHANNELS,
  MERGE,
  PATCH_DIM,
  PATCH_SIZE,
  TEMPORAL_PATCH,
} from '../backend/reference-models';

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
  const scale = [0, 1, 2].map((c) => 1 / (255 * IMAGE_STD[c]!));
  const shift = [0, 1, 2].map((c) => IMAGE_MEAN[c]! / IMAGE_STD[c]!);
  let row = 0;
  for (let t = 0; t < gt; t++) {
    for (let hb = 0; hb < gh / MERGE; hb++) {
      for (let wb = 0; wb < gw / MERGE; wb++) {
        for (let mh = 0; mh < MERGE; mh++) {
          for (let mw = 0; mw < MERGE; mw++, row++) {
            const py = (hb * MERGE + mh) * PATCH_SIZE;
            const px = (wb * MERGE + mw) * PATCH_SIZE;
            let o = row * PATCH_DIM;
            for (let c = 0; c < CHANNELS; c++) {
              const sc = scale[c]!;
              const sh = shift[c]!;
              for (let tp = 0; tp < TEMPORAL_PATCH; tp++) {
                const fi = Math.min(t * TEMPORAL_PATCH + tp, frames.length - 1);
                const frame = frames[fi]!;
                for (let y = 0; y < PATCH_SIZE; y++) {
                  let src = ((py + y) * width + px) * CHANNELS + c;
                  for (let x = 0; x < PATCH_SIZE; x++, src += CHANNELS) {
                    data[o++] = frame[src]! * sc - sh;
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return { data, grid: { t: gt, h: gh, w: gw } };
}
