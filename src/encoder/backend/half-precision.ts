const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
const i32 = new Int32Array(f32.buffer);

/**
 * IEEE 754 binary16 bits of a float32 (round to nearest even): the scalar reference that
 * float16 staging (Float16Cast, ONNX Runtime's Cast) is checked against.
 */
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
