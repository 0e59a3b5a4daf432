import type { StagingDtype } from '../common/kernel';

/** safetensors' dtype names for the staging dtypes. */
export const SAFETENSORS_DTYPE: Readonly<Record<StagingDtype, 'F32' | 'F16' | 'BF16'>> = {
  float32: 'F32',
  float16: 'F16',
  bfloat16: 'BF16',
};

/**
 * The head of a safetensors file holding one tensor, by the format's spec
 * (huggingface/safetensors): an 8-byte little-endian header length N, then N bytes of UTF-8
 * JSON `{name: {dtype, shape, data_offsets: [0, bytes]}}`, then the tensor's bytes
 * (row-major, little-endian). The JSON is padded with spaces so the data starts on an
 * 8-byte boundary, as the reference writer does. No npm library writes safetensors
 * (the maintained ones only read), and the format is this small.
 */
export function safetensorsHead(
  name: string,
  dtype: StagingDtype,
  shape: readonly number[],
  byteLength: number,
): Buffer {
  const json = JSON.stringify({
    [name]: { dtype: SAFETENSORS_DTYPE[dtype], shape, data_offsets: [0, byteLength] },
  });
  const raw = Buffer.from(json, 'utf8');
  const padded = Math.ceil(raw.length / 8) * 8;
  const head = Buffer.alloc(8 + padded, 0x20);
  head.writeBigUInt64LE(BigInt(padded), 0);
  raw.copy(head, 8);
  return head;
}
