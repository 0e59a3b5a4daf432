import { compressedFormat, compressedInfo, decodeCompressed } from './compressed';
import type { DecodedAudio } from './common';
import { decodeWav, wavInfo } from './wav';

/**
 * Audio files by their magic bytes: WAV (RIFF), FLAC, Ogg Vorbis and MP3. The plan reads
 * `audioInfo` (headers and frames only); preprocessing calls `decodeAudio`.
 */

/** What the plan needs of any supported audio file, read from its headers and frames. */
export function audioInfo(buf: Uint8Array): {
  sampleRate: number;
  frames: number;
  channels: number;
} {
  const format = compressedFormat(buf);
  return format ? compressedInfo(buf, format) : wavInfo(buf);
}

/** Any supported file (WAV, FLAC, Ogg Vorbis) → mono samples at its own rate. */
export async function decodeAudio(buf: Uint8Array): Promise<DecodedAudio> {
  const format = compressedFormat(buf);
  return format ? decodeCompressed(buf, format) : decodeWav(buf);
}
