import {
  fromBfloat16Bits,
  fromFloat16Bits,
  toBfloat16Array,
  toBfloat16Bits,
  toFloat16Bits,
} from './half-precision';

describe('float16 staging conversion', () => {
  it('encodes exact values and the special cases bit for bit', () => {
    expect(toFloat16Bits(0)).toBe(0x0000);
    expect(toFloat16Bits(-0)).toBe(0x8000);
    expect(toFloat16Bits(1)).toBe(0x3c00);
    expect(toFloat16Bits(-2)).toBe(0xc000);
    expect(toFloat16Bits(65504)).toBe(0x7bff); // largest finite half
    expect(toFloat16Bits(1e6)).toBe(0x7c00); // overflow → +Infinity
    expect(toFloat16Bits(-Infinity)).toBe(0xfc00);
    expect(toFloat16Bits(NaN) & 0x7c00).toBe(0x7c00);
    expect(toFloat16Bits(2 ** -24)).toBe(0x0001); // smallest subnormal
    expect(toFloat16Bits(2 ** -26)).toBe(0x0000); // underflow → 0
  });

  it('rounds to nearest even and round-trips within half precision', () => {
    expect(toFloat16Bits(1 + 2 ** -11)).toBe(0x3c00); // tie → even (down)
    expect(toFloat16Bits(1 + 3 * 2 ** -11)).toBe(0x3c02); // tie → even (up)
    for (let i = 0; i < 2000; i++) {
      const v = Math.fround(Math.sin(i) * 10 ** ((i % 9) - 4));
      const back = fromFloat16Bits(toFloat16Bits(v));
      expect(Math.abs(back - v)).toBeLessThanOrEqual(Math.max(Math.abs(v) * 2 ** -11, 2 ** -25));
    }
  });
});

describe('bfloat16 staging conversion', () => {
  it('keeps the upper 16 bits, rounding to nearest even', () => {
    expect(toBfloat16Bits(1)).toBe(0x3f80);
    expect(toBfloat16Bits(-2)).toBe(0xc000);
    expect(toBfloat16Bits(0)).toBe(0x0000);
    expect(toBfloat16Bits(-0)).toBe(0x8000);
    // 1 + 2^-8 is exactly halfway between 1 and the next bfloat16 (1 + 2^-7): ties to even (1).
    expect(toBfloat16Bits(1 + 2 ** -8)).toBe(0x3f80);
    // 1 + 3·2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: ties to even (up).
    expect(toBfloat16Bits(1 + 3 * 2 ** -8)).toBe(0x3f82);
    // Just above halfway rounds up.
    expect(toBfloat16Bits(1 + 2 ** -8 + 2 ** -20)).toBe(0x3f81);
    expect(toBfloat16Bits(3.4e38)).toBe(0x7f80); // rounds past the largest finite: +Inf
    expect(toBfloat16Bits(Infinity)).toBe(0x7f80);
    expect(toBfloat16Bits(NaN) & 0x7fc0).toBe(0x7fc0); // stays a quiet NaN
  });

  it('converts arrays the same way as single values, and back without loss', () => {
    const src = new Float32Array([1, -2.5, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 65504, 1e-40, NaN]);
    const out = toBfloat16Array(src);
    expect([...out]).toEqual([...src].map(toBfloat16Bits));
    expect(fromBfloat16Bits(out[1]!)).toBe(-2.5);
    expect(fromBfloat16Bits(toBfloat16Bits(0.1))).toBeCloseTo(0.1, 2);
  });
});

// float16 arrays are converted by ONNX Runtime (Float16Cast), which cannot make tensors in
// Jest's realm: test/float16-cast.e2e-spec.ts checks it against toFloat16Bits.
describe('the bfloat16 array conversion agrees with the scalar one bit for bit', () => {
  // Edge cases: zeros, subnormal halves, the normal/subnormal boundary, halfway ties,
  // the largest half, overflow, Inf and NaN, in both signs, plus a sweep of bit patterns.
  const edges = [
    0,
    1e-8,
    2 ** -24,
    2 ** -25,
    3 * 2 ** -26,
    6.0e-5,
    2 ** -14,
    2 ** -14 - 2 ** -25,
    1,
    1 + 2 ** -11,
    1 + 3 * 2 ** -11,
    65504,
    65519.99,
    65520,
    1e6,
    Infinity,
    NaN,
  ];
  const values = new Float32Array([...edges, ...edges.map((v) => -v)]);
  const sweep = new Uint32Array(1 << 16).map((_, i) => Math.imul(i, 0x9e3779b1) >>> 0);
  const all = new Float32Array([...values, ...new Float32Array(sweep.buffer)]);

  /** Indices where the fast array result differs (a NaN only has to stay a quiet NaN). */
  const mismatches = (fast: Uint16Array, scalar: (v: number) => number, quietNaN: number) =>
    [...all.keys()].filter((i) =>
      Number.isNaN(all[i]) ? (fast[i]! & quietNaN) !== quietNaN : fast[i] !== scalar(all[i]!),
    );

  it('bfloat16', () => {
    expect(mismatches(toBfloat16Array(all), toBfloat16Bits, 0x7fc0)).toEqual([]);
  });
});
