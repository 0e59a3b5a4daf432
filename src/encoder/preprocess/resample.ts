import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

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
 * The two passes run as WebAssembly SIMD (resample-kernels.wat.ts).
 * libvips (sharp) instead centres upscaling at `x / S − 0.5`, which moves the whole image
 * half an output pixel: the drift this module exists to remove.
 */

const PRECISION_BITS = 32 - 8 - 2;
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

/**
 * This thread's resampler: the kernels are compiled once, and the one instance keeps its
 * memory between resizes. A resampler per resize (as the preprocessing worker once made)
 * touched fresh WebAssembly memory on every image: 1,780 page faults per 1024×768 photo
 * (perf), and that thread's CPU per photo fell from 37.5 to 26.7 core-ms without them.
 */
let resampler: Promise<BicubicResampler> | undefined;

/**
 * The kernels, assembled from resample-kernels.wat at build time (`npm run kernels`; the
 * .wasm beside this file, copied into dist/ by `nest build`): no assembler at run time.
 */
export const KERNELS_WASM = join(__dirname, 'resample-kernels.wasm');

async function compileKernels(): Promise<WebAssembly.Module> {
  return new WebAssembly.Module(await readFile(KERNELS_WASM));
}

/**
 * This thread's resampler, ready to use (the first call compiles it). Resizes are
 * synchronous, so one instance serves every caller in the thread.
 */
export function loadBicubicResampler(): Promise<BicubicResampler> {
  resampler ??= compileKernels().then((module) => new BicubicResampler(module));
  return resampler;
}

interface Kernels {
  horizontal(...args: number[]): void;
  vertical(...args: number[]): void;
}

const PAGE = 65536;
/** Slack after each region: the kernels read and write up to 15 bytes past it. */
const SLACK = 16;
const align = (n: number) => Math.ceil(n / SLACK) * SLACK;
/**
 * Memory kept between resizes, per thread (WebAssembly memory never shrinks, so this is
 * what a preprocessing thread may hold for good). An upscale within the default
 * EPD_MAX_PIXELS (~1M pixels) needs at most ~10 MB for its three regions; 32 MiB covers
 * up to ~3.5M output pixels. A larger resize gets memory of its own, used once.
 */
const KEEP_BYTES = 32 * 1024 * 1024;

export class BicubicResampler {
  private kept?: { memory: WebAssembly.Memory; k: Kernels };

  constructor(private readonly module: WebAssembly.Module) {}

  /**
   * An instance whose memory holds \`bytes\`. Up to KEEP_BYTES the memory is kept for the
   * next resize (fresh pages cost a page fault each: 1,780 and ~10 core-ms for a 1024×768
   * photo); a larger one is used once and left to the garbage collector, so a rare huge
   * image does not pin its memory in the worker.
   */
  private instance(bytes: number): { memory: WebAssembly.Memory; k: Kernels } {
    const pages = Math.ceil(bytes / PAGE);
    if (bytes > KEEP_BYTES) return this.instantiate(pages);
    const have = this.kept ? this.kept.memory.buffer.byteLength / PAGE : 0;
    if (!this.kept) this.kept = this.instantiate(pages);
    else if (have < pages) this.kept.memory.grow(pages - have);
    return this.kept;
  }

  private instantiate(pages: number): { memory: WebAssembly.Memory; k: Kernels } {
    const memory = new WebAssembly.Memory({ initial: pages });
    const k = new WebAssembly.Instance(this.module, { env: { memory } })
      .exports as unknown as Kernels;
    return { memory, k };
  }

  /**
   * `src` is `inW × inH` packed RGB; returns `outW × outH` packed RGB. Sizes equal to the
   * input skip their pass, as Pillow does (an unchanged image is returned as is). Only the
   * source rows the vertical pass reads are resampled horizontally, as in Pillow.
   */
  resize(src: Uint8Array, inW: number, inH: number, outW: number, outH: number): Uint8Array {
    if (src.length !== inW * inH * 3) throw new RangeError('source is not inW × inH RGB');
    const needH = outW !== inW;
    const needV = outH !== inH;
    if (!needH && !needV) return src;

    const vert = needV ? coefficients(inH, outH) : undefined;
    const firstRow = vert ? vert.bounds[0]! : 0;
    const lastRow = vert ? vert.bounds[(outH - 1) * 2]! + vert.bounds[(outH - 1) * 2 + 1]! : inH;
    const rows = lastRow - firstRow;
    const horiz = needH ? coefficients(inW, outW) : undefined;

    // Layout: source rows | horizontal output | vertical output | coefficients.
    const srcOff = 0;
    const srcLen = rows * inW * 3;
    const midOff = align(srcOff + srcLen + SLACK);
    const midLen = needH ? rows * outW * 3 : 0;
    const outOff = align(midOff + midLen + SLACK);
    const outLen = needV ? outW * outH * 3 : 0;
    let end = align(outOff + outLen + SLACK);
    const place = (c: Coeffs | undefined) => {
      if (!c) return { bounds: 0, taps: 0 };
      const at = { bounds: end, taps: end + c.bounds.byteLength };
      end = align(at.taps + c.taps.byteLength);
      return at;
    };
    const hAt = place(horiz);
    const vAt = place(vert);

    const { memory, k } = this.instance(end);
    const heap = new Uint8Array(memory.buffer);
    const words = new Int32Array(memory.buffer);
    heap.set(src.subarray(firstRow * inW * 3, lastRow * inW * 3), srcOff);
    if (horiz) {
      words.set(horiz.bounds, hAt.bounds / 4);
      words.set(horiz.taps, hAt.taps / 4);
      k.horizontal(srcOff, inW * 3, rows, outW, midOff, hAt.bounds, hAt.taps, horiz.ksize);
      if (!vert) return copyOut(heap, midOff, midLen);
    }
    const v = vert!;
    words.set(v.bounds, vAt.bounds / 4);
    // The vertical pass reads rows relative to the first one copied.
    for (let i = vAt.bounds / 4; i < vAt.bounds / 4 + outH * 2; i += 2)
      words[i] = words[i]! - firstRow;
    words.set(v.taps, vAt.taps / 4);
    k.vertical(horiz ? midOff : srcOff, outW * 3, outH, outOff, vAt.bounds, vAt.taps, v.ksize);
    return copyOut(heap, outOff, outLen);
  }
}

/** A copy of memory that is overwritten at once (no zero fill first: every byte is set). */
function copyOut(heap: Uint8Array, offset: number, length: number): Uint8Array {
  const out = Buffer.allocUnsafeSlow(length);
  out.set(heap.subarray(offset, offset + length));
  return out;
}
