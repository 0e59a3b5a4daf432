import { createHash } from 'node:crypto';
import { blake3 } from '@noble/hashes/blake3';

export type MmHashAlgorithm = 'blake3' | 'sha256' | 'sha512';

/** The longest key a directory name can be on the file systems consumers mount. */
const MAX_KEY_BYTES = 255;

/**
 * Why `key` cannot name a directory under the EC path, or undefined when it can. vLLM uses
 * the identifier verbatim as one path component; we refuse what would escape or break it.
 */
export function unsafeKeyReason(key: string): string | undefined {
  if (key.length === 0) return 'it is empty';
  if (Buffer.byteLength(key, 'utf8') > MAX_KEY_BYTES) return `it is over ${MAX_KEY_BYTES} bytes`;
  if (key === '.' || key === '..') return `it is "${key}"`;
  if (key.includes('/')) return 'it contains "/"';
  if (key.includes('\\')) return 'it contains "\\"';
  if (key.includes('\0')) return 'it contains NUL';
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x1f\x7f]/.test(key)) return 'it contains a control character';
  if (key.startsWith('.')) return 'it starts with "." (names starting with "." are ours)';
  return undefined;
}

/**
 * The byte stream vLLM's `MultiModalHasher.hash_kwargs(image=MediaWithBytes, model_id=…)`
 * feeds its hasher for one image part without a uuid (vllm/multimodal/hasher.py, read at
 * vllm-project/vllm 2f41c894): keys sorted ("image" < "model_id"), each key's UTF-8 name,
 * then its value's serialisation.
 *
 * - An image loaded without a mode conversion (PIL opened it as RGB): the item serialises
 *   as `"image"` + the original file bytes.
 * - A converted one (RGBA, LA, P, L, CMYK, … → RGB): its `io_config` first, then the
 *   bytes: `"image.io_config.image_mode" "RGB"`, `"image.io_config.rgba_background_color.<i>"`
 *   + int64 little-endian 255 for i = 0, 1, 2, then `"image.data"` + the bytes.
 * - `"model_id"` + the consumer's exact --model string.
 */
export function mmHashStream(file: Uint8Array, converted: boolean, modelId: string): Buffer[] {
  const s = (text: string) => Buffer.from(text, 'utf8');
  const int64 = (v: number) => {
    const b = Buffer.alloc(8);
    b.writeBigInt64LE(BigInt(v));
    return b;
  };
  const item = converted
    ? [
        s('image.io_config.image_mode'),
        s('RGB'),
        ...[0, 1, 2].flatMap((i) => [s(`image.io_config.rgba_background_color.${i}`), int64(255)]),
        s('image.data'),
        Buffer.from(file.buffer, file.byteOffset, file.byteLength),
      ]
    : [s('image'), Buffer.from(file.buffer, file.byteOffset, file.byteLength)];
  return [s('image'), ...item, s('model_id'), s(modelId)];
}

/** vLLM's mm_hash of one image part: the hex digest of mmHashStream. */
export function mmHash(
  file: Uint8Array,
  converted: boolean,
  modelId: string,
  algorithm: MmHashAlgorithm,
): string {
  const stream = mmHashStream(file, converted, modelId);
  if (algorithm === 'blake3') {
    const h = blake3.create({});
    for (const chunk of stream) h.update(chunk);
    return Buffer.from(h.digest()).toString('hex');
  }
  const h = createHash(algorithm);
  for (const chunk of stream) h.update(chunk);
  return h.digest('hex');
}
