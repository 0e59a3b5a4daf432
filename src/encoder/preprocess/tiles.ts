import { CHANNELS, type VisionGeometry } from '../../common/vision-geometry';
import { luts } from './patchify';

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
  const [R, G, B] = luts(g);
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
