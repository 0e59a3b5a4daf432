import { FLACDecoder } from '@wasm-audio-decoders/flac';
import { OggVorbisDecoder } from '@wasm-audio-decoders/ogg-vorbis';
import CodecParser from 'codec-parser';
import {
  AudioDecodeError,
  MAX_SAMPLE_RATE,
  MIN_SAMPLE_RATE,
  type DecodedAudio,
} from './audio-common';

/**
 * FLAC and Ogg Vorbis, beside WAV. Decoding uses the maintained WebAssembly decoders of
 * the wasm-audio-decoders project; the plan reads the stream's frames with its
 * codec-parser (headers and frame boundaries only, nothing decoded), so the caps and the
 * exact token count are known before a sample is decoded, as for WAV.
 * MP3 is refused with a clear message: its exact decoded length depends on the encoder's
 * gapless padding, which the plan cannot yet read as exactly as the decoder applies it.
 */
export type CompressedFormat = 'flac' | 'vorbis';

const tag = (buf: Uint8Array, o: number) =>
  String.fromCharCode(buf[o] ?? 0, buf[o + 1] ?? 0, buf[o + 2] ?? 0, buf[o + 3] ?? 0);

/** The compressed format of `buf` by its magic bytes; undefined for anything else. */
export function compressedFormat(buf: Uint8Array): CompressedFormat | undefined {
  if (tag(buf, 0) === 'fLaC') return 'flac';
  if (tag(buf, 0) === 'OggS') return 'vorbis';
  const mp3 = tag(buf, 0).startsWith('ID3') || (buf[0] === 0xff && ((buf[1] ?? 0) & 0xe0) === 0xe0);
  if (mp3) throw new AudioDecodeError('MP3 is not supported: send WAV, FLAC or Ogg Vorbis');
  return undefined;
}

export interface CompressedInfo {
  format: CompressedFormat;
  sampleRate: number;
  /** Samples per channel in the stream, from its frames. */
  frames: number;
  channels: number;
}

/** Sample rate and length from the frames' headers (no decoding). */
export function compressedInfo(buf: Uint8Array, format: CompressedFormat): CompressedInfo {
  if (format === 'vorbis') {
    // The first Ogg page carries the codec's identification packet: "\x01vorbis" for
    // Vorbis ("OpusHead" for Opus, which this decoder does not read).
    const head = Buffer.from(buf.subarray(0, 512)).toString('latin1');
    if (!head.includes('\x01vorbis')) {
      const codec = head.includes('OpusHead') ? 'Opus' : 'streams other than Vorbis';
      throw new AudioDecodeError(`Ogg ${codec} is not supported: send Ogg Vorbis, FLAC or WAV`);
    }
  }
  const parser = new CodecParser(format === 'flac' ? 'audio/flac' : 'application/ogg', {
    enableLogging: false,
  });
  let frames = 0;
  let sampleRate = 0;
  let channels = 0;
  try {
    for (const frame of parser.parseAll(buf)) {
      // Ogg pages carry codec frames; FLAC frames are their own codec frames.
      const codecFrames = 'codecFrames' in frame ? frame.codecFrames : [frame];
      for (const f of codecFrames) {
        frames += f.samples;
        sampleRate = f.header.sampleRate;
        channels = Math.max(channels, f.header.channels);
      }
    }
  } catch (err) {
    throw new AudioDecodeError(`unreadable ${format} stream: ${(err as Error).message}`);
  }
  if (frames === 0) throw new AudioDecodeError(`no audio frames in the ${format} stream`);
  if (sampleRate < MIN_SAMPLE_RATE || sampleRate > MAX_SAMPLE_RATE) {
    throw new AudioDecodeError(
      `sample rate ${sampleRate} Hz is outside ${MIN_SAMPLE_RATE}–${MAX_SAMPLE_RATE} Hz`,
    );
  }
  return { format, sampleRate, frames, channels };
}

/** Decodes to mono (channels averaged), checking the length the plan read. */
export async function decodeCompressed(
  buf: Uint8Array,
  format: CompressedFormat,
): Promise<DecodedAudio> {
  const info = compressedInfo(buf, format);
  const decoder = format === 'flac' ? new FLACDecoder() : new OggVorbisDecoder();
  try {
    await decoder.ready;
    const out = await decoder.decodeFile(buf);
    if (out.errors.length > 0)
      throw new AudioDecodeError(`corrupt ${format} stream: ${out.errors[0]!.message}`);
    const channels = out.channelData.length;
    if (channels === 0 || out.samplesDecoded !== info.frames) {
      throw new AudioDecodeError(
        `${format} stream decoded to ${out.samplesDecoded} samples, its frames promised ${info.frames}`,
      );
    }
    const samples = new Float32Array(out.samplesDecoded);
    for (const ch of out.channelData)
      for (let i = 0; i < samples.length; i++) samples[i]! += ch[i]!;
    if (channels > 1) for (let i = 0; i < samples.length; i++) samples[i]! /= channels;
    return { sampleRate: out.sampleRate, channels, samples };
  } finally {
    decoder.free();
  }
}
