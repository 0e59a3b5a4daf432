/** WAV (RIFF/WAVE): header reading, decoding to mono, and writing (probes, tests, benchmarks). */
import { AudioDecodeError, MAX_SAMPLE_RATE, MIN_SAMPLE_RATE, type DecodedAudio } from './common';

export interface WavInfo {
  format: number;
  channels: number;
  sampleRate: number;
  bits: number;
  /** The sample bytes actually present (a data chunk may claim more than the file has). */
  data: Uint8Array;
  /** Sample frames present: data bytes / (channels × bytes per sample). */
  frames: number;
}

/**
 * Reads a RIFF/WAVE header without decoding a sample: PCM 8/16/24/32-bit or IEEE float
 * 32/64, any channel count, WAVE_FORMAT_EXTENSIBLE included. Sample rates outside
 * 8–192 kHz are refused here, before anything is allocated from them.
 */
export function wavInfo(buf: Uint8Array): WavInfo {
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const tag = (o: number) => String.fromCharCode(buf[o]!, buf[o + 1]!, buf[o + 2]!, buf[o + 3]!);
  if (buf.length < 12 || tag(0) !== 'RIFF' || tag(8) !== 'WAVE') {
    throw new AudioDecodeError('not a RIFF/WAVE file');
  }
  let format = 0;
  let channels = 0;
  let sampleRate = 0;
  let bits = 0;
  let data: Uint8Array | undefined;
  for (let o = 12; o + 8 <= buf.length;) {
    const id = tag(o);
    const size = view.getUint32(o + 4, true);
    const body = o + 8;
    if (id === 'fmt ') {
      if (size < 16) throw new AudioDecodeError('fmt chunk too short');
      format = view.getUint16(body, true);
      channels = view.getUint16(body + 2, true);
      sampleRate = view.getUint32(body + 4, true);
      bits = view.getUint16(body + 14, true);
      if (format === 0xfffe && size >= 26) format = view.getUint16(body + 24, true);
    } else if (id === 'data') {
      data = buf.subarray(body, Math.min(buf.length, body + size));
    }
    o = body + size + (size % 2);
  }
  if (!format) throw new AudioDecodeError('missing fmt chunk');
  if (!data) throw new AudioDecodeError('missing data chunk');
  if (channels < 1) throw new AudioDecodeError('no channels');
  if (sampleRate < MIN_SAMPLE_RATE || sampleRate > MAX_SAMPLE_RATE) {
    throw new AudioDecodeError(
      `sample rate ${sampleRate} Hz is outside ${MIN_SAMPLE_RATE}–${MAX_SAMPLE_RATE} Hz`,
    );
  }
  const isFloat = format === 3;
  if (format !== 1 && !isFloat)
    throw new AudioDecodeError(`unsupported WAV format ${format} (PCM or float only)`);
  if (isFloat ? bits !== 32 && bits !== 64 : ![8, 16, 24, 32].includes(bits)) {
    throw new AudioDecodeError(`unsupported ${isFloat ? 'float' : 'PCM'} bit depth ${bits}`);
  }
  const frames = Math.floor(data.length / ((bits / 8) * channels));
  return { format, channels, sampleRate, bits, data, frames };
}

/** Decodes a WAV file (see wavInfo) to mono samples, downmixing channels by averaging. */
export function decodeWav(buf: Uint8Array): DecodedAudio {
  const { format, channels, sampleRate, bits, data, frames: frameCount } = wavInfo(buf);
  const isFloat = format === 3;
  const bytes = bits / 8;
  const dv = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const read = (o: number): number => {
    if (isFloat) return bits === 32 ? dv.getFloat32(o, true) : dv.getFloat64(o, true);
    switch (bits) {
      case 8:
        return (dv.getUint8(o) - 128) / 128;
      case 16:
        return dv.getInt16(o, true) / 32768;
      case 24: {
        const v = dv.getUint8(o) | (dv.getUint8(o + 1) << 8) | (dv.getInt8(o + 2) << 16);
        return v / 8388608;
      }
      default:
        return dv.getInt32(o, true) / 2147483648;
    }
  };
  const samples = new Float32Array(frameCount);
  for (let i = 0; i < frameCount; i++) {
    let sum = 0;
    for (let c = 0; c < channels; c++) sum += read((i * channels + c) * bytes);
    samples[i] = sum / channels;
  }
  return { sampleRate, channels, samples };
}

/** A WAV file of mono samples (PCM16 or float32), for probes, tests and benchmarks. */
export function encodeWav(
  samples: Float32Array,
  sampleRate: number,
  format: 'pcm16' | 'float32' = 'pcm16',
): Buffer {
  const bytes = format === 'pcm16' ? 2 : 4;
  const buf = Buffer.alloc(44 + samples.length * bytes);
  buf.write('RIFF', 0);
  buf.writeUInt32LE(36 + samples.length * bytes, 4);
  buf.write('WAVEfmt ', 8);
  buf.writeUInt32LE(16, 16);
  buf.writeUInt16LE(format === 'pcm16' ? 1 : 3, 20);
  buf.writeUInt16LE(1, 22);
  buf.writeUInt32LE(sampleRate, 24);
  buf.writeUInt32LE(sampleRate * bytes, 28);
  buf.writeUInt16LE(bytes, 32);
  buf.writeUInt16LE(bytes * 8, 34);
  buf.write('data', 36);
  buf.writeUInt32LE(samples.length * bytes, 40);
  for (let i = 0; i < samples.length; i++) {
    const s = Math.max(-1, Math.min(1, samples[i]!));
    if (format === 'pcm16') buf.writeInt16LE(Math.round(s * 32767), 44 + i * 2);
    else buf.writeFloatLE(s, 44 + i * 4);
  }
  return buf;
}
