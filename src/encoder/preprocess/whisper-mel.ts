/**
 * Whisper log-mel features, as transformers' `WhisperFeatureExtractor` computes them
 * (its numpy path, `_np_extract_fbank_features`), for 16 kHz mono audio in 30 s windows:
 * - the window is zero-padded to 480000 samples (`padding="max_length"`);
 * - STFT: centred frames (reflect padding of n_fft/2), a periodic Hann window of 400
 *   samples, hop 160, the one-sided power spectrum (201 bins); the last frame dropped,
 *   leaving 3000;
 * - a Slaney-scale, Slaney-normalised mel filter bank (0–8 kHz), floored at 1e-10,
 *   log10;
 * - clamped to (window max − 8), then (x + 4) / 4.
 * Output: float32 `[n_mels, 3000]` per window, the layout Whisper-style towers
 * (Qwen2-Audio's included) take as `input_features`. Computed in double precision and
 * rounded once, like numpy.
 */
export const SAMPLE_RATE = 16_000;
export const N_FFT = 400;
export const HOP = 160;
export const WINDOW_SAMPLES = 30 * SAMPLE_RATE;
export const MEL_FRAMES = WINDOW_SAMPLES / HOP; // 3000
const BINS = N_FFT / 2 + 1;

/** Mel frames a window of `samples` (≤ 480000) really covers: its attention mask. */
export function validFrames(samples: number): number {
  return Math.min(MEL_FRAMES, Math.ceil(samples / HOP));
}

/** Qwen2-Audio's tokens for F mel frames: `((F − 1) // 2 + 1 − 2) // 2 + 1`, floor division. */
export function qwen2AudioTokens(frames: number): number {
  return Math.max(0, Math.floor((Math.floor((frames - 1) / 2) + 1 - 2) / 2) + 1);
}

// Slaney mel scale: linear below 1 kHz, logarithmic above.
const MIN_LOG_HZ = 1000;
const MIN_LOG_MEL = 15;
const LOG_STEP = 27 / Math.log(6.4);
const hzToMel = (hz: number) =>
  hz < MIN_LOG_HZ ? (3 * hz) / 200 : MIN_LOG_MEL + Math.log(hz / MIN_LOG_HZ) * LOG_STEP;
const melToHz = (mel: number) =>
  mel < MIN_LOG_MEL ? (200 * mel) / 3 : MIN_LOG_HZ * Math.exp((mel - MIN_LOG_MEL) / LOG_STEP);

/** One triangular filter: its first bin and weights (zero outside). */
interface MelFilter {
  start: number;
  weights: Float64Array;
}

const filterBanks = new Map<number, MelFilter[]>();

/** transformers' `mel_filter_bank(201, n_mels, 0, 8000, 16000, norm="slaney", mel_scale="slaney")`. */
export function melFilters(nMels: number): MelFilter[] {
  const cached = filterBanks.get(nMels);
  if (cached) return cached;
  const melMin = hzToMel(0);
  const melMax = hzToMel(SAMPLE_RATE / 2);
  const edges = Array.from({ length: nMels + 2 }, (_, i) =>
    melToHz(melMin + ((melMax - melMin) * i) / (nMels + 1)),
  );
  const fftFreqs = Array.from({ length: BINS }, (_, k) => ((SAMPLE_RATE / 2) * k) / (BINS - 1));
  const filters: MelFilter[] = [];
  for (let m = 0; m < nMels; m++) {
    const [lo, mid, hi] = [edges[m]!, edges[m + 1]!, edges[m + 2]!];
    const enorm = 2 / (hi - lo);
    const w = fftFreqs.map((f) => {
      const down = (f - lo) / (mid - lo);
      const up = (hi - f) / (hi - mid);
      return Math.max(0, Math.min(down, up)) * enorm;
    });
    let start = w.findIndex((v) => v > 0);
    if (start < 0) start = 0;
    let end = BINS;
    while (end > start && w[end - 1] === 0) end--;
    filters.push({ start, weights: Float64Array.from(w.slice(start, Math.max(end, start))) });
  }
  filterBanks.set(nMels, filters);
  return filters;
}

/** Periodic Hann window (numpy: `np.hanning(n + 1)[:-1]`). */
const HANN = Float64Array.from(
  { length: N_FFT },
  (_, i) => 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / N_FFT),
);

/** Mixed-radix complex FFT of length 400 (= 4 · 4 · 5 · 5), decimation in time. */
const FACTORS = [4, 4, 5, 5] as const;
const COS = Float64Array.from({ length: N_FFT }, (_, i) => Math.cos((2 * Math.PI * i) / N_FFT));
const SIN = Float64Array.from({ length: N_FFT }, (_, i) => -Math.sin((2 * Math.PI * i) / N_FFT));
const SCRATCH_RE = FACTORS.map((p) => new Float64Array(p));
const SCRATCH_IM = FACTORS.map((p) => new Float64Array(p));

function fft(
  n: number,
  level: number,
  inRe: Float64Array,
  inOff: number,
  stride: number,
  outRe: Float64Array,
  outIm: Float64Array,
  outOff: number,
): void {
  const p = FACTORS[level]!;
  const m = n / p;
  if (m === 1) {
    // The last factor: a direct p-point DFT of real inputs.
    const step = N_FFT / n;
    for (let s = 0; s < p; s++) {
      let sr = 0;
      let si = 0;
      const inc = (s * step) % N_FFT;
      for (let q = 0, t = 0; q < p; q++, t = t + inc >= N_FFT ? t + inc - N_FFT : t + inc) {
        const x = inRe[inOff + q * stride]!;
        sr += x * COS[t]!;
        si += x * SIN[t]!;
      }
      outRe[outOff + s] = sr;
      outIm[outOff + s] = si;
    }
    return;
  }
  for (let q = 0; q < p; q++)
    fft(m, level + 1, inRe, inOff + q * stride, stride * p, outRe, outIm, outOff + q * m);
  // Combine the p interleaved sub-transforms: X[k + s·m] = Σ_q W_n^{q(k + s·m)} Y_q[k].
  const step = N_FFT / n; // twiddle index scale: W_n^x = W_400^(x·step)
  const yr = SCRATCH_RE[level]!;
  const yi = SCRATCH_IM[level]!;
  for (let k = 0; k < m; k++) {
    for (let q = 0; q < p; q++) {
      yr[q] = outRe[outOff + q * m + k]!;
      yi[q] = outIm[outOff + q * m + k]!;
    }
    for (let s = 0; s < p; s++) {
      const kk = k + s * m;
      let sr = 0;
      let si = 0;
      const base = (kk * step) % N_FFT;
      for (let q = 0, t = 0; q < p; q++, t = t + base >= N_FFT ? t + base - N_FFT : t + base) {
        const c = COS[t]!;
        const d = SIN[t]!;
        sr += yr[q]! * c - yi[q]! * d;
        si += yr[q]! * d + yi[q]! * c;
      }
      outRe[outOff + kk] = sr;
      outIm[outOff + kk] = si;
    }
  }
}

/**
 * The features of one window: `samples` (≤ 480000 at 16 kHz) → float32 [nMels, 3000],
 * written into `out` at `offset` (so a request's windows pack without copies).
 */
export function logMelWindow(
  samples: Float32Array,
  nMels: number,
  out: Float32Array,
  offset = 0,
): void {
  if (samples.length > WINDOW_SAMPLES) throw new RangeError('a window is at most 30 s');
  const pad = N_FFT / 2;
  const total = WINDOW_SAMPLES;
  // The zero-padded window with reflect padding on both sides (numpy.pad mode="reflect").
  const padded = new Float64Array(total + 2 * pad);
  for (let i = 0; i < samples.length; i++) padded[pad + i] = samples[i]!;
  for (let i = 1; i <= pad; i++) {
    padded[pad - i] = padded[pad + i]!;
    padded[pad + total - 1 + i] = padded[pad + total - 1 - i]!;
  }
  const filters = melFilters(nMels);
  const frame = new Float64Array(N_FFT);
  const re = new Float64Array(N_FFT);
  const im = new Float64Array(N_FFT);
  const power = new Float64Array(BINS);
  const logSpec = new Float64Array(nMels * MEL_FRAMES);
  let max = -Infinity;
  for (let t = 0; t < MEL_FRAMES; t++) {
    const start = t * HOP;
    for (let i = 0; i < N_FFT; i++) frame[i] = padded[start + i]! * HANN[i]!;
    fft(N_FFT, 0, frame, 0, 1, re, im, 0);
    for (let k = 0; k < BINS; k++) power[k] = re[k]! * re[k]! + im[k]! * im[k]!;
    for (let m = 0; m < nMels; m++) {
      const f = filters[m]!;
      let s = 0;
      for (let j = 0; j < f.weights.length; j++) s += f.weights[j]! * power[f.start + j]!;
      const v = Math.log10(Math.max(s, 1e-10));
      logSpec[m * MEL_FRAMES + t] = v;
      if (v > max) max = v;
    }
  }
  const floor = max - 8;
  for (let i = 0; i < logSpec.length; i++) out[offset + i] = (Math.max(logSpec[i]!, floor) + 4) / 4;
}
