/**
 * Bicubic resize of packed RGB (uint8) that samples exactly as Pillow's `Image.resize(...,
 * BICUBIC)`, the resize transformers' Qwen2VLImageProcessor uses: so a real vision tower
 * sees the pixels its processor produced in training.
 *
 * Pillow's algorithm (libImaging/Resample.c), reproduced step for step:
 * - separable: a horizontal pass into an 8-bit intermediate (only the source rows the
 *   vertical pass reads), then a vertical pass;
 * - output pixel x samples around `center = (x + 0.5) · scale` (scale = in / out), with
 *   the cubic convolution kernel (a = −0.5) stretched by `max(scale, 1)` so that
 *   shrinking also filters (antialias);
 * - taps are normalised to sum 1, then converted to 22-bit fixed point, and each output
 *   is rounded and clipped to 0..255.
 * libvips (sharp) instead centres upscaling at `x / S − 0.5`, which moves the whole image
 * half an output pixel: the drift this module exists to remove.
 */

const PRECISION_BITS = 32 - 8 - 2;
const HALF = 1 << (PRECISION_BITS - 1);
const ONE = 1 << PRECISION_BITS;
const SUPPORT = 2;

function bicubic(x: number): number {
  const a = -0.5;
  if (x < 0) x = -x;
  if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
  return 0;
}

/** Per output index: first source index, tap count, and `ksize` fixed-point taps. */
interface Coeffs {
  ksize: number;
  bounds: Int32Array; // [xmin, count] per output
  taps: Int32Array; // outSize × ksize
}

function coefficients(inSize: number, outSize: number): Coeffs {
  const scale = inSize / outSize;
  const filterscale = Math.max(scale, 1);
  const support = SUPPORT * filterscale;
  const ksize = Math.ceil(support) * 2 + 1;
  const bounds = new Int32Array(outSize * 2);
  const taps = new Int32Array(outSize * ksize);
  const w = new Float64Array(ksize);
  for (let xx = 0; xx < outSize; xx++) {
    const center = (xx + 0.5) * scale;
    const ss = 1 / filterscale;
    const xmin = Math.max(0, Math.trunc(center - support + 0.5));
    const xmax = Math.min(inSize, Math.trunc(center + support + 0.5)) - xmin;
    let ww = 0;
    for (let x = 0; x < xmax; x++) {
      w[x] = bicubic((x + xmin - center + 0.5) * ss);
      ww += w[x]!;
    }
    for (let x = 0; x < xmax; x++) {
      const k = ww !== 0 ? w[x]! / ww : w[x]!;
      taps[xx * ksize + x] = k < 0 ? Math.trunc(-0.5 + k * ONE) : Math.trunc(0.5 + k * ONE);
    }
    bounds[xx * 2] = xmin;
    bounds[xx * 2 + 1] = xmax;
  }
  return { ksize, bounds, taps };
}

const clip8 = (v: number) => (v >= ONE << 8 ? 255 : v <= 0 ? 0 : v >> PRECISION_BITS);

/**
 * `src` is `inW × inH` packed RGB; returns `outW × outH` packed RGB. Sizes equal to the
 * input skip their pass, as Pillow does (an unchanged image is returned as is).
 */
export function resizeBicubicRgb(
  src: Uint8Array,
  inW: number,
  inH: number,
  outW: number,
  outH: number,
): Uint8Array {
  if (src.length !== inW * inH * 3) throw new RangeError('source is not inW × inH RGB');
  const needH = outW !== inW;
  const needV = outH !== inH;
  if (!needH && !needV) return src;

  const vert = coefficients(inH, outH);
  // Only the source rows the vertical pass will read are resampled horizontally.
  const firstRow = needV ? vert.bounds[0]! : 0;
  const lastRow = needV ? vert.bounds[(outH - 1) * 2]! + vert.bounds[(outH - 1) * 2 + 1]! : inH;
  const rows = needH ? horizontal(src, inW, firstRow, lastRow - firstRow, outW) : src;
  if (!needV) return rows;
  return vertical(rows, outW, outH, vert, needH ? firstRow : 0);
}

function horizontal(
  src: Uint8Array,
  inW: number,
  firstRow: number,
  rowCount: number,
  outW: number,
): Uint8Array {
  const { ksize, bounds, taps } = coefficients(inW, outW);
  const out = new Uint8Array(outW * rowCount * 3);
  for (let y = 0; y < rowCount; y++) {
    const rowIn = (y + firstRow) * inW * 3;
    const rowOut = y * outW * 3;
    for (let xx = 0; xx < outW; xx++) {
      const xmin = bounds[xx * 2]!;
      const n = bounds[xx * 2 + 1]!;
      const k0 = xx * ksize;
      let r = HALF;
      let g = HALF;
      let b = HALF;
      let p = rowIn + xmin * 3;
      // Int32 arithmetic, as in Pillow: |tap| < 2^22, so products and sums stay under 2^31.
      // (Math.imul is inlined here, in a worker thread; called across realms, as from a
      // Jest test, it is not, and the resize runs ~60x slower: test it through the CLI.)
      for (let x = 0; x < n; x++, p += 3) {
        const k = taps[k0 + x]!;
        r = (r + Math.imul(src[p]!, k)) | 0;
        g = (g + Math.imul(src[p + 1]!, k)) | 0;
        b = (b + Math.imul(src[p + 2]!, k)) | 0;
      }
      const o = rowOut + xx * 3;
      out[o] = clip8(r);
      out[o + 1] = clip8(g);
      out[o + 2] = clip8(b);
    }
  }
  return out;
}

function vertical(
  src: Uint8Array,
  width: number,
  outH: number,
  { ksize, bounds, taps }: Coeffs,
  rowOffset: number,
): Uint8Array {
  const stride = width * 3;
  const out = new Uint8Array(stride * outH);
  // Row by row into an accumulator: sequential reads, instead of walking columns.
  const acc = new Int32Array(stride);
  for (let yy = 0; yy < outH; yy++) {
    const ymin = bounds[yy * 2]! - rowOffset;
    const n = bounds[yy * 2 + 1]!;
    const k0 = yy * ksize;
    acc.fill(HALF);
    for (let y = 0; y < n; y++) {
      const k = taps[k0 + y]!;
      const row = (ymin + y) * stride;
      for (let i = 0; i < stride; i++) acc[i] = (acc[i]! + Math.imul(src[row + i]!, k)) | 0;
    }
    const rowOut = yy * stride;
    for (let i = 0; i < stride; i++) out[rowOut + i] = clip8(acc[i]!);
  }
  return out;
}
