import { AUDIO_MEL_FRAMES, AUDIO_SAMPLE_RATE } from '../pipeline/model-contract';
import {
  AudioDecodeError,
  MAX_SAMPLE_RATE,
  MIN_SAMPLE_RATE,
  type DecodedAudio,
} from './audio-common';
import { compressedFormat, compressedInfo, decodeCompressed } from './compressed-audio';

export {
  AudioDecodeError,
  MAX_SAMPLE_RATE,
  MIN_SAMPLE_RATE,
  type DecodedAudio,
} from './audio-common';
import { WINDOW_SAMPLES, logMelWindow, qwen2AudioTokens, validFrames } from './whisper-mel';

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

/** Length after resample(): the same rounding, so a plan and a decode agree. */
export function resampledLength(length: number, from: number, to: number): number {
  return from === to ? length : Math.max(1, Math.round((length * to) / from));
}

/** Sample counts of the 30 s windows that `samples` 16 kHz samples are cut into. */
function windowLengths(samples: number): number[] {
  const n = Math.max(1, Math.ceil(samples / WINDOW_SAMPLES));
  return Array.from({ length: n }, (_, w) =>
    Math.min(WINDOW_SAMPLES, samples - w * WINDOW_SAMPLES),
  );
}

/** Tokens of `frames` samples at `rate` Hz, from the header: what audioFeatures gives. */
export function audioTokens(frames: number, rate: number): number {
  const samples = resampledLength(frames, rate, AUDIO_SAMPLE_RATE);
  return windowLengths(samples).reduce((n, len) => n + qwen2AudioTokens(validFrames(len)), 0);
}

/**
 * Windowed-sinc resampling to `to` Hz (Kaiser window, β = 8.6, 16 zero crossings each
 * side, cut-off at 0.95 of the lower Nyquist): band-limited, so content above the new
 * Nyquist does not fold back as aliases the way linear interpolation lets it. Polyphase:
 * the rates' ratio is up/down in lowest terms, and the taps of each of the `up` phases
 * are computed once and normalised to unity gain.
 */
export function resample(samples: Float32Array, from: number, to: number): Float32Array {
  if (from === to) return samples;
  const n = resampledLength(samples.length, from, to);
  const g = gcd(from, to);
  const up = to / g;
  const down = from / g;
  // Exact phases for common rates (44.1 kHz: 160); odd rates share 1024 quantised phases
  // (1/1024 of a sample of timing error) instead of a table of up to 16000 phases.
  const phases = Math.min(up, 1024);
  const cutoff = 0.95 * Math.min(1, to / from); // of the input Nyquist
  const half = Math.ceil(16 / cutoff); // taps each side, in input samples
  const taps = 2 * half;
  const beta = 8.6;
  const i0b = besselI0(beta);
  const table = new Float64Array(phases * taps);
  for (let p = 0; p < phases; p++) {
    let norm = 0;
    for (let k = 0; k < taps; k++) {
      const x = p / phases + (half - 1 - k); // position minus tap: tap j = centre − half + 1 + k
      const r = x / half;
      const kaiser = Math.abs(r) < 1 ? besselI0(beta * Math.sqrt(1 - r * r)) / i0b : 0;
      const arg = Math.PI * cutoff * x;
      const w = (x === 0 ? 1 : Math.sin(arg) / arg) * kaiser;
      table[p * taps + k] = w;
      norm += w;
    }
    for (let k = 0; k < taps; k++) table[p * taps + k]! /= norm;
  }
  const out = new Float32Array(n);
  const last = samples.length - 1;
  for (let i = 0; i < n; i++) {
    const centre = Math.floor((i * down) / up);
    const phase = Math.min(phases - 1, Math.round((((i * down) % up) / up) * phases));
    const base = phase * taps;
    const first = centre - half + 1;
    let acc = 0;
    if (first >= 0 && first + taps - 1 <= last) {
      for (let k = 0; k < taps; k++) acc += samples[first + k]! * table[base + k]!;
    } else {
      for (let k = 0; k < taps; k++) {
        const j = first + k;
        if (j >= 0 && j <= last) acc += samples[j]! * table[base + k]!;
      }
    }
    out[i] = acc;
  }
  return out;
}

function gcd(a: number, b: number): number {
  while (b) [a, b] = [b, a % b];
  return a;
}

/** Modified Bessel function of the first kind, order 0 (power series). */
function besselI0(x: number): number {
  let sum = 1;
  let term = 1;
  const q = (x * x) / 4;
  for (let k = 1; k < 50; k++) {
    term *= q / (k * k);
    sum += term;
    if (term < 1e-12 * sum) break;
  }
  return sum;
}

export interface AudioFeatures {
  /** Packed windows, float32 [windows, nMels, 3000]. */
  data: Float32Array;
  windows: number;
  /** Valid mel frames per window (SGLang's audio_feature_lens). */
  frames: number[];
  /** Tokens per window: the rows of the tower's 750 that are real. */
  windowTokens: number[];
}

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

/** Audio bytes → Whisper log-mel windows, as Qwen2-Audio's processor prepares them. */
export async function audioFeatures(file: Uint8Array, nMels: number): Promise<AudioFeatures> {
  const decoded = await decodeAudio(file);
  const samples = resample(decoded.samples, decoded.sampleRate, AUDIO_SAMPLE_RATE);
  const lengths = windowLengths(samples.length);
  const size = nMels * AUDIO_MEL_FRAMES;
  const data = new Float32Array(lengths.length * size);
  lengths.forEach((_, w) =>
    logMelWindow(
      samples.subarray(w * WINDOW_SAMPLES, (w + 1) * WINDOW_SAMPLES),
      nMels,
      data,
      w * size,
    ),
  );
  const frames = lengths.map(validFrames);
  return { data, windows: lengths.length, frames, windowTokens: frames.map(qwen2AudioTokens) };
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
