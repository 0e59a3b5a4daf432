/**
 * Float32 parts back to back. A single part is returned as is, without a copy; otherwise
 * `into(length)` gives the buffer to fill (a fresh one unless the caller keeps a scratch
 * buffer), and the packed view of exactly `length` values is returned.
 */
export function pack(
  parts: Float32Array[],
  into: (length: number) => Float32Array = (n) => new Float32Array(n),
): Float32Array {
  if (parts.length === 1) return parts[0]!;
  const total = parts.reduce((n, p) => n + p.length, 0);
  const out = into(total).subarray(0, total);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}
