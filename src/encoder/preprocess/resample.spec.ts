import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import wabtInit from 'wabt';
import { type BicubicResampler, KERNELS_WASM, loadBicubicResampler } from './resample';

describe('the resampler kernels artefact', () => {
  it('resample-kernels.wasm is the assembly of resample-kernels.wat (`npm run kernels`)', async () => {
    const wabt = await wabtInit();
    const wat = readFileSync(join(__dirname, 'resample-kernels.wat'), 'utf8');
    const parsed = wabt.parseWat('resample-kernels.wat', wat, { simd: true });
    try {
      const assembled = Buffer.from(parsed.toBinary({}).buffer);
      expect(assembled.equals(readFileSync(KERNELS_WASM))).toBe(true);
    } finally {
      parsed.destroy();
    }
  });
});

/**
 * Expected bytes come from Pillow 9.4 (`Image.fromarray(a).resize(size, Image.BICUBIC)`);
 * test/preprocess-fidelity.e2e-spec.ts compares against Pillow on every CI run.
 */
describe('BicubicResampler (Pillow BICUBIC, bit for bit)', () => {
  let r: BicubicResampler;
  beforeAll(async () => {
    r = await loadBicubicResampler();
  });
  /** The memory the resampler keeps between resizes (a private field). */
  const keptMemory = () => (r as unknown as { kept?: { memory: WebAssembly.Memory } }).kept?.memory;
  // 4×3 RGB, values 0, 7, 14, … 245
  const src = Uint8Array.from({ length: 36 }, (_, i) => i * 7);

  it('shrinks one axis and stretches the other as Pillow does (4×3 → 6×2)', () => {
    expect([...r.resize(src, 4, 3, 6, 2)]).toEqual([
      26, 32, 39, 35, 42, 49, 51, 58, 65, 64, 71, 78, 80, 87, 94, 90, 97, 104, 141, 148, 155, 151,
      158, 165, 167, 174, 181, 180, 187, 194, 196, 203, 210, 206, 213, 220,
    ]);
  });

  it('upscales as Pillow does, sampling at (x + 0.5) / scale − 0.5 (4×3 → 3×5)', () => {
    expect([...r.resize(src, 4, 3, 3, 5)]).toEqual([
      0, 5, 12, 26, 33, 40, 53, 60, 67, 30, 37, 44, 58, 65, 72, 85, 92, 99, 88, 95, 102, 116, 123,
      130, 143, 150, 157, 146, 153, 160, 174, 181, 188, 201, 208, 215, 178, 185, 192, 206, 213, 220,
      233, 240, 247,
    ]);
  });

  it('returns an unchanged size as is, and refuses a buffer that is not w × h RGB', () => {
    expect(r.resize(src, 4, 3, 4, 3)).toBe(src);
    expect(() => r.resize(src, 5, 3, 2, 2)).toThrow('source is not inW × inH RGB');
  });

  it('is one resampler per thread, whose memory serves every resize (no fresh pages each time)', async () => {
    expect(await loadBicubicResampler()).toBe(r);
    r.resize(src, 4, 3, 6, 2);
    const first = keptMemory();
    expect(first).toBeInstanceOf(WebAssembly.Memory);
    r.resize(src, 4, 3, 3, 5);
    expect(keptMemory()).toBe(first);
  });

  it('gives a resize beyond what it keeps (32 MiB) memory of its own, and keeps its own as it was', () => {
    r.resize(src, 4, 3, 6, 2);
    const before = keptMemory()!;
    const size = before.buffer.byteLength;
    // 6000×1000 → 6000×1001: 18 MB of source rows and 18 MB of output, 36 MB in all.
    const big = new Uint8Array(6000 * 1000 * 3).fill(100);
    const out = r.resize(big, 6000, 1000, 6000, 1001);
    expect(out.length).toBe(6000 * 1001 * 3);
    expect(out[12345]).toBe(100);
    expect(keptMemory()).toBe(before);
    expect(before.buffer.byteLength).toBe(size);
  });
});
