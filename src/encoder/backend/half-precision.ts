const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
const i32 = new Int32Array(f32.buffer);

/** IEEE 754 binary16 bits of a float32 (round to nearest even), for float16 staging. */
export function toFloat16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0]!;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rem > halfway || (rem === halfway && half & 1)) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && half & 1)) half++;
  return sign | half;
}

/**
 * float32 → float16 bits for a whole embedding (round to nearest even), on its integer
 * bits: normal results add the rounding bias and shift (F. Giesen's float_to_half_fast3
 * method), so the common path has no float arithmetic and one rare branch. Bit-identical
 * to toFloat16Bits (the spec checks it).
 */
export function toFloat16Array(src: Float32Array): Uint16Array {
  const out = new Uint16Array(src.length);
  const bits = new Int32Array(src.buffer, src.byteOffset, src.length);
  for (let i = 0; i < bits.length; i++) {
    const x = bits[i]!;
    const sign = (x >>> 16) & 0x8000;
    const a = x & 0x7fffffff;
    let h: number;
    if (a >= 0x47800000) {
      h = a > 0x7f800000 ? 0x7e00 : 0x7c00; // NaN stays NaN; overflow is ±Inf
    } else if (a >= 0x38800000) {
      // Normal half: rebias the exponent, add the rounding bias (+1 when the kept bits are odd).
      h = (a + ((15 - 127) << 23) + 0xfff + ((a >>> 13) & 1)) >>> 13;
    } else {
      h = toFloat16Bits(src[i]!) & 0x7fff; // subnormal or zero: rare, exact path
    }
    out[i] = h | sign;
  }
  return out;
}

export function fromFloat16Bits(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * 2 ** -14 * (mant / 1024);
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * 2 ** (exp - 15) * (1 + mant / 1024);
}

/**
 * bfloat16 bits of a float32: its upper 16 bits, rounded to nearest even (what
 * `torch.Tensor.to(torch.bfloat16)` does). NaN stays a quiet NaN; overflow rounds to ±Inf.
 */
export function toBfloat16Bits(value: number): number {
  f32[0] = value;
  return bfloat16OfBits(i32[0]!);
}

export function toBfloat16Array(src: Float32Array): Uint16Array {
  const out = new Uint16Array(src.length);
  const bits = new Int32Array(src.buffer, src.byteOffset, src.length);
  for (let i = 0; i < bits.length; i++) out[i] = bfloat16OfBits(bits[i]!);
  return out;
}

/**
 * The bfloat16 bits of float32 bits `x` (as an int32). Int32 arithmetic throughout: a
 * uint32 view pushed V8 to doubles, 3x slower.
 */
function bfloat16OfBits(x: number): number {
  return (x & 0x7fffffff) > 0x7f800000
    ? (x >>> 16) | 0x40 // NaN stays a quiet NaN
    : ((x + 0x7fff + ((x >>> 16) & 1)) | 0) >>> 16;
}

export function fromBfloat16Bits(h: number): number {
  u32[0] = h << 16;
  return f32[0]!;
}
