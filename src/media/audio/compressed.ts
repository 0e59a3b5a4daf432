import { FLACDecoder } from '@wasm-audio-decoders/flac';
import { OggVorbisDecoder } from '@wasm-audio-decoders/ogg-vorbis';
import CodecParser from 'codec-parser';
import { MPEGDecoder } from 'mpg123-decoder';
import { AudioDecodeError, MAX_SAMPLE_RATE, MIN_SAMPLE_RATE, type DecodedAudio } from './common';

/**
 * FLAC, Ogg Vorbis and MP3, beside WAV. Decoding uses the maintained WebAssembly decoders
 * of the wasm-audio-decoders project; the plan reads the stream's frames with its
 * codec-parser (headers and frame boundaries only, nothing decoded), so the caps and the
 * exact token count are known before a sample is decoded, as for WAV.
 * MP3 decodes gapless (mpg123): the Xing/Info frame carries no audio, and the LAME tag's
 * encoder delay and padding are trimmed. The plan applies the same rule.
 */
export type CompressedFormat = 'flac' | 'vorbis' | 'mp3';

const MIME = {
  flac: 'audio/flac',
  vorbis: 'application/ogg',
  mp3: 'audio/mpeg',
} as const satisfies Record<CompressedFormat, string>;

const tag = (buf: Uint8Array, o: number) =>
  String.fromCharCode(buf[o] ?? 0, buf[o + 1] ?? 0, buf[o + 2] ?? 0, buf[o + 3] ?? 0);

/** The compressed format of `buf` by its magic bytes; undefined for anything else. */
export function compressedFormat(buf: Uint8Array): CompressedFormat | undefined {
  if (tag(buf, 0) === 'fLaC') return 'flac';
  if (tag(buf, 0) === 'OggS') return 'vorbis';
  if (tag(buf, 0).startsWith('ID3') || (buf[0] === 0xff && ((buf[1] ?? 0) & 0xe0) === 0xe0))
    return 'mp3';
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
      throw new AudioDecodeError(
        `Ogg ${codec} is not supported: send Ogg Vorbis, FLAC, MP3 or WAV`,
      );
    }
  }
  const parser = new CodecParser(MIME[format], { enableLogging: false });
  let first: { data: Uint8Array; samples: number } | undefined;
  let frames = 0;
  let sampleRate = 0;
  let channels = 0;
  try {
    for (const frame of parser.parseAll(buf)) {
      // Ogg pages carry codec frames; FLAC frames are their own codec frames.
      const codecFrames = 'codecFrames' in frame ? frame.codecFrames : [frame];
      for (const f of codecFrames) {
        first ??= f;
        frames += f.samples;
        sampleRate = f.header.sampleRate;
        channels = Math.max(channels, f.header.channels);
      }
    }
  } catch (err) {
    throw new AudioDecodeError(`unreadable ${format} stream: ${(err as Error).message}`);
  }
  if (format === 'mp3' && first) frames -= gaplessTrim(first);
  if (frames <= 0) throw new AudioDecodeError(`no audio frames in the ${format} stream`);
  if (sampleRate < MIN_SAMPLE_RATE || sampleRate > MAX_SAMPLE_RATE) {
    throw new AudioDecodeError(
      `sample rate ${sampleRate} Hz is outside ${MIN_SAMPLE_RATE}–${MAX_SAMPLE_RATE} Hz`,
    );
  }
  return { format, sampleRate, frames, channels };
}

/**
 * Samples an MP3 decoder drops, read from its first frame: the whole frame when it is a
 * Xing/Info tag frame (no audio), plus the LAME tag's encoder delay and padding.
 */
function gaplessTrim(first: { data: Uint8Array; samples: number }): number {
  const head = Buffer.from(first.data.subarray(0, Math.min(first.data.length, 200)));
  const xing = Math.max(head.indexOf('Xing', 0, 'latin1'), head.indexOf('Info', 0, 'latin1'));
  if (xing < 0) return 0;
  const lame = head.indexOf('LAME', xing, 'latin1');
  const at = lame + 21; // 12 bits of delay, then 12 bits of padding
  const delayPadding =
    lame >= 0 && at + 2 < head.length
      ? ((head[at]! << 4) | (head[at + 1]! >> 4)) + (((head[at + 1]! & 0xf) << 8) | head[at + 2]!)
      : 0;
  return first.samples + delayPadding;
}

/** A decoder's output length may differ from the plan's by at most one MP3 frame. */
const MAX_LENGTH_SLACK = 1152;

/** Decodes to mono (channels averaged), at exactly the length the plan read. */
export async function decodeCompressed(
  buf: Uint8Array,
  format: CompressedFormat,
): Promise<DecodedAudio> {
  const info = compressedInfo(buf, format);
  let out: {
    channelData: Float32Array[];
    samplesDecoded: number;
    sampleRate: number;
    errors: { message: string }[];
  };
  if (format === 'mp3') {
    const decoder = new MPEGDecoder();
    try {
      await decoder.ready;
      out = decoder.decode(buf); // the whole file in one call: gapless trimming applied
    } finally {
      decoder.free();
    }
  } else {
    const decoder = format === 'flac' ? new FLACDecoder() : new OggVorbisDecoder();
    try {
      await decoder.ready;
      out = await decoder.decodeFile(buf);
    } finally {
      decoder.free();
    }
  }
  if (out.errors.length > 0)
    throw new AudioDecodeError(`corrupt ${format} stream: ${out.errors[0]!.message}`);
  const channels = out.channelData.length;
  if (channels === 0 || Math.abs(out.samplesDecoded - info.frames) > MAX_LENGTH_SLACK) {
    throw new AudioDecodeError(
      `${format} stream decoded to ${out.samplesDecoded} samples, its frames promised ${info.frames}`,
    );
  }
  // Exactly the planned length (the tokens were counted from it): an encoder whose padding
  // the plan misread by less than a frame is trimmed or zero-padded at the end.
  const samples = new Float32Array(info.frames);
  const n = Math.min(info.frames, out.samplesDecoded);
  for (const ch of out.channelData) for (let i = 0; i < n; i++) samples[i]! += ch[i]!;
  if (channels > 1) for (let i = 0; i < n; i++) samples[i]! /= channels;
  return { sampleRate: out.sampleRate, channels, samples };
}
