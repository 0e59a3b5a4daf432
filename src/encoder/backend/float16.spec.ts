import { fromFloat16Bits, toFloat16Array, toFloat16Bits } from './float16';

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
    const values = Float32Array.from({ length: 2000 }, (_, i) => Math.sin(i) * 10 ** ((i % 9) - 4));
    const halves = toFloat16Array(values);
    values.forEach((v, i) => {
      const back = fromFloat16Bits(halves[i]!);
      expect(Math.abs(back - v)).toBeLessThanOrEqual(Math.max(Math.abs(v) * 2 ** -11, 2 ** -25));
    });
  });
});
