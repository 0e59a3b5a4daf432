import type { WireDtype } from './frame';

/**
 * NumPy type codes. NumPy has no bfloat16: its bits are written as uint16 (`<u2`), which
 * `(a.astype('<u4') << 16).view('<f4')` turns back into float32 without loss.
 */
const DESCR: Record<WireDtype, string> = { float32: '<f4', float16: '<f2', bfloat16: '<u2' };

/** The header of a NumPy .npy v1.0 file for a C-ordered little-endian array. */
export function npyHeader(shape: number[], dtype: WireDtype): Buffer {
  const descr = DESCR[dtype];
  const shapeText = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let dict = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shapeText}, }`;
  const preamble = 10; // magic (6) + version (2) + header length (2)
  const pad = 64 - ((preamble + dict.length + 1) % 64);
  dict = `${dict}${' '.repeat(pad % 64)}\n`;
  const out = Buffer.alloc(preamble + dict.length);
  out.write('\x93NUMPY', 0, 'latin1');
  out.writeUInt8(1, 6);
  out.writeUInt8(0, 7);
  out.writeUInt16LE(dict.length, 8);
  out.write(dict, preamble, 'latin1');
  return out;
}
