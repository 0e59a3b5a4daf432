import { CHANNELS, type VisionGeometry } from '../../common/vision-geometry';
import { luts } from './patchify';

/**
 * One normalisation table set per mean and std a process serves (a handful: each model's
 * image and video processors), keyed by value, so a geometry made per request (a video's
 * own mean and std) finds its tables.
 */
const tables = new Map<string, [Float32Array, Float32Array, Float32Array]>();

function tablesOf(g: VisionGeometry) {
  const key = `${g.imageMean.join()}/${g.imageStd.join()}`;
  let t = tables.get(key);
  if (!t) {
    t = luts(g);
    tables.set(key, t);
  }
  return t;
}

/**
 * Writes the `size × size` tile whose top-left corner is (`top`, `left`) of an RGB image
 * `width` pixels wide into `out` at `offset`, channel-major (`[3, size, size]`: transformers'
 * pixel_values layout, channels first), normalised with the geometry's mean and std by the
 * same tables the patch layout uses (rescale in float64, then float32 arithmetic), so a tile
 * is bit-identical to the reference processor's for the same resized pixels.
 */
export function writeTile(
  rgb: Uint8Array,
  width: number,
  top: number,
  left: number,
  g: VisionGeometry,
  out: Float32Array,
  offset: number,
): void {
  const size = g.tiling!.size;
  const [R, G, B] = tablesOf(g);
  const plane = size * size;
  for (let y = 0; y < size; y++) {
    let s = ((top + y) * width + left) * CHANNELS;
    let o = offset + y * size;
    for (let x = 0; x < size; x++, s += CHANNELS, o++) {
      out[o] = R[rgb[s]!]!;
      out[o + plane] = G[rgb[s + 1]!]!;
      out[o + 2 * plane] = B[rgb[s + 2]!]!;
    }
  }
}
