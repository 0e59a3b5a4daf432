import { decodeAudio } from '../../media/audio-decode';
import { AUDIO_MEL_FRAMES, AUDIO_SAMPLE_RATE } from '../pipeline/model-contract';
import { WINDOW_SAMPLES, logMelWindow, qwen2AudioTokens, validFrames } from './whisper-mel';

/**
 * Audio as Qwen2-Audio's processor prepares it, from any file src/media/audio decodes:
 * band-limited resampling to 16 kHz, 30 s windows, Whisper log-mel features, and the
 * token count per window (the plan computes the same from the headers).
 */

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

/** The 30 s windows `frames` samples at `rate` Hz are cut into, from the header. */
export function audioWindows(frames: number, rate: number): number {
  return windowLengths(resampledLength(frames, rate, AUDIO_SAMPLE_RATE)).length;
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
