import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { audioInfo, decodeAudio } from '../../media/audio/decode';
import { decodeWav, encodeWav } from '../../media/audio/wav';
import { audioFeatures, audioTokens, resample } from './audio';
import {
  QWEN2_VL_GEOMETRY,
  QWEN3_VL_GEOMETRY,
  patchDim,
  tokensForGrid,
  type VisionGeometry,
} from '../../common/vision-geometry';
import { patchify } from './patchify';
import { roundHalfEven, smartResize } from './smart-resize';

const MIN = 56 * 56;
const MAX_DEFAULT = 14 * 14 * 4 * 1280; // transformers' smart_resize default
const MAX_QWEN2VL = 12845056; // Qwen2-VL-7B-Instruct preprocessor_config.json

// Expected values computed with transformers' smart_resize (Python) for these inputs.
describe('smartResize (Qwen2-VL values)', () => {
  it.each([
    // [height, width, max_pixels, expected [h, w]]
    [768, 1024, MAX_QWEN2VL, [756, 1036]],
    [768, 1024, MAX_DEFAULT, [756, 1036]],
    [1080, 1920, MAX_DEFAULT, [728, 1316]],
    [1080, 1920, MAX_QWEN2VL, [1092, 1932]],
    [1, 1, MAX_DEFAULT, [56, 56]],
    [32, 32, MAX_DEFAULT, [56, 56]],
    [224, 224, MAX_DEFAULT, [224, 224]],
    [70, 70, MAX_DEFAULT, [56, 56]], // round(2.5) == 2 in Python
    [98, 98, MAX_DEFAULT, [112, 112]], // round(3.5) == 4
    [28, 5000, MAX_DEFAULT, [28, 5012]],
    [10, 1500, MAX_DEFAULT, [28, 700]],
    [4000, 4000, MAX_DEFAULT, [980, 980]],
    [3000, 40, MAX_DEFAULT, [2996, 28]],
  ])('%ix%i (max %i) → %j', (h, w, max, expected) => {
    expect(smartResize(h, w, MIN, max, 28)).toEqual(expected);
  });

  // Qwen3-VL: factor 32 (16-pixel patches, 2×2 merge), and its checkpoint's bounds
  // (size.shortest_edge 65,536, size.longest_edge 16,777,216); computed with the same
  // smart_resize in Python (test/interop/qwen2vl_reference.py, factor=32).
  it.each([
    [768, 1024, 65536, 16777216, [768, 1024]],
    [1080, 1920, 65536, 16777216, [1088, 1920]],
    [224, 224, 65536, 16777216, [256, 256]],
    [300, 200, 65536, 16777216, [320, 224]],
    [4032, 3024, 65536, 16777216, [4032, 3008]],
    [5000, 5000, 65536, 16777216, [4096, 4096]],
    [48, 80, 65536, 16777216, [224, 352]],
    [1080, 1920, 3136, 1003520, [736, 1312]],
    [80, 80, 3136, 1003520, [64, 64]], // round(2.5) == 2
  ])('factor 32: %ix%i (min %i, max %i) → %j', (h, w, min, max, expected) => {
    expect(smartResize(h, w, min, max, 32)).toEqual(expected);
  });

  it('keeps every side a multiple of 28 and total pixels within bounds', () => {
    for (let i = 0; i < 500; i++) {
      const h = 1 + Math.floor(Math.random() * 4000);
      const w = Math.max(1, Math.min(4000, Math.floor(h * (0.05 + Math.random() * 20))));
      const [rh, rw] = smartResize(h, w, MIN, MAX_DEFAULT, 28);
      expect(rh % 28).toBe(0);
      expect(rw % 28).toBe(0);
      expect(rh * rw).toBeLessThanOrEqual(MAX_DEFAULT);
      expect(rh * rw).toBeGreaterThanOrEqual(Math.min(MIN, 28 * 28));
    }
  });

  it('rejects aspect ratios over 200 like transformers', () => {
    expect(() => smartResize(10, 2100, MIN, MAX_DEFAULT, 28)).toThrow(
      /absolute aspect ratio must be smaller than 200, got 210/,
    );
  });

  it('rounds half to even like Python', () => {
    expect([0.5, 1.5, 2.5, 3.5, 2.4, 2.6, 27.43].map(roundHalfEven)).toEqual([
      0, 2, 2, 4, 2, 3, 27,
    ]);
  });

  it('counts one token per 2×2 merge', () => {
    expect(tokensForGrid(1, 54, 74, 2)).toBe(999);
    expect(tokensForGrid(2, 4, 4, 2)).toBe(8);
  });
});

describe.each([
  ['Qwen2-VL (14-pixel patches, CLIP mean/std)', QWEN2_VL_GEOMETRY],
  ['Qwen3-VL (16-pixel patches, mean/std 0.5)', QWEN3_VL_GEOMETRY],
] as [string, VisionGeometry][])('patchify, %s', (_name, g) => {
  const P = g.patchSize;
  const DIM = patchDim(g);
  /** A frame whose pixel value encodes its coordinates, to check where each lands. */
  function frame(h: number, w: number, f = 0): Uint8Array {
    const px = new Uint8Array(h * w * 3);
    for (let y = 0; y < h; y++)
      for (let x = 0; x < w; x++)
        for (let c = 0; c < 3; c++)
          px[(y * w + x) * 3 + c] = (y * 7 + x * 3 + c * 50 + f * 100) % 256;
    return px;
  }
  const raw = (v: number, c: number) =>
    Math.round((v * g.imageStd[c]! + g.imageMean[c]!) * 255) + 0;

  it('emits rows in 2×2-merge order with (c, t, patch, patch) layout, matching the transformers transpose', () => {
    const h = 4 * P;
    const w = 6 * P;
    const px = frame(h, w);
    const { data, grid } = patchify([px], h, w, g);
    expect(grid).toEqual({ t: 1, h: 4, w: 6 });
    expect(data.length).toBe(4 * 6 * DIM);
    expect(DIM).toBe(3 * 2 * P * P);
    // Reference: index math of reshape(gt,2,C,gh/2,2,P,gw/2,2,P).transpose(0,3,6,4,7,2,1,5,8)
    const gh = 4;
    const gw = 6;
    let checked = 0;
    for (let row = 0; row < gh * gw; row++) {
      const mw = row % 2;
      const mh = Math.floor(row / 2) % 2;
      const wb = Math.floor(row / 4) % (gw / 2);
      const hb = Math.floor(row / 4 / (gw / 2));
      for (const [c, tp, y, x] of [
        [0, 0, 0, 0],
        [2, 1, P - 1, P - 1],
        [1, 0, 5, 9],
        [1, 1, 7, 2],
      ] as const) {
        const yy = (hb * 2 + mh) * P + y;
        const xx = (wb * 2 + mw) * P + x;
        const value = data[row * DIM + ((c * 2 + tp) * P + y) * P + x]!;
        expect(raw(value, c)).toBe(px[(yy * w + xx) * 3 + c]);
        checked++;
      }
    }
    expect(checked).toBe(gh * gw * 4);
  });

  it('repeats the last frame for an odd frame count, and packs two frames per temporal patch', () => {
    const side = 2 * P;
    const a = frame(side, side, 0);
    const b = frame(side, side, 1);
    const c = frame(side, side, 2);
    const { data, grid } = patchify([a, b, c], side, side, g);
    expect(grid).toEqual({ t: 2, h: 2, w: 2 });
    const at = (row: number, tp: number) => raw(data[row * DIM + (0 * 2 + tp) * P * P]!, 0);
    expect([at(0, 0), at(0, 1), at(4, 0), at(4, 1)]).toEqual([a[0], b[0], c[0], c[0]]);
  });
});

describe('audio', () => {
  const tone = (hz: number, rate: number, seconds: number) =>
    Float32Array.from(
      { length: Math.round(rate * seconds) },
      (_, i) => 0.5 * Math.sin((2 * Math.PI * hz * i) / rate),
    );

  it('decodes PCM16 and float32 WAV tones it wrote', () => {
    const s = tone(440, 16000, 0.1);
    for (const fmt of ['pcm16', 'float32'] as const) {
      const d = decodeWav(encodeWav(s, 16000, fmt));
      expect(d).toMatchObject({ sampleRate: 16000, channels: 1 });
      expect(d.samples.length).toBe(1600);
      const maxErr = Math.max(...Array.from(d.samples, (v, i) => Math.abs(v - s[i]!)));
      expect(maxErr).toBeLessThan(fmt === 'pcm16' ? 1e-4 : 1e-7);
    }
  });

  it('downmixes stereo and resamples 44.1 kHz to 16 kHz, keeping the pitch', () => {
    const rate = 44100;
    const mono = tone(1000, rate, 0.5);
    const wav = Buffer.alloc(44 + mono.length * 4);
    wav.write('RIFF', 0);
    wav.writeUInt32LE(36 + mono.length * 4, 4);
    wav.write('WAVEfmt ', 8);
    wav.writeUInt32LE(16, 16);
    wav.writeUInt16LE(1, 20);
    wav.writeUInt16LE(2, 22);
    wav.writeUInt32LE(rate, 24);
    wav.writeUInt32LE(rate * 4, 28);
    wav.writeUInt16LE(4, 32);
    wav.writeUInt16LE(16, 34);
    wav.write('data', 36);
    wav.writeUInt32LE(mono.length * 4, 40);
    mono.forEach((v, i) => {
      wav.writeInt16LE(Math.round(v * 32767), 44 + i * 4);
      wav.writeInt16LE(Math.round(v * 32767), 46 + i * 4);
    });
    const d = decodeWav(wav);
    expect(d.channels).toBe(2);
    const r = resample(d.samples, rate, 16000);
    expect(r.length).toBe(8000);
    // zero crossings of a 1 kHz tone over 0.5 s: ~1000
    let crossings = 0;
    for (let i = 1; i < r.length; i++) if (r[i - 1]! < 0 !== r[i]! < 0) crossings++;
    expect(crossings).toBeGreaterThan(990);
    expect(crossings).toBeLessThan(1010);
  });

  it('resamples band-limited: a tone above the new Nyquist is removed, not folded back; one below keeps its level', () => {
    const rms = (x: Float32Array, from = 200, to = x.length - 200) => {
      let s = 0;
      for (let i = from; i < to; i++) s += x[i]! * x[i]!;
      return Math.sqrt(s / (to - from));
    };
    // 12 kHz at 48 kHz: above 16 kHz's Nyquist (8 kHz). Linear interpolation would fold it
    // to 4 kHz at most of its level; the filter leaves < 1% (−40 dB).
    const high = tone(12000, 48000, 0.5);
    expect(rms(resample(high, 48000, 16000)) / rms(high)).toBeLessThan(0.01);
    // 1 kHz at 44.1 kHz and at an odd rate (quantised phases): level within 1%.
    for (const rate of [44100, 44057]) {
      const low = tone(1000, rate, 0.5);
      expect(rms(resample(low, rate, 16000)) / rms(low)).toBeCloseTo(1, 2);
    }
  });

  it('turns audio into 30 s Whisper log-mel windows, with Qwen2-Audio tokens per window', async () => {
    const oneSecond = await audioFeatures(encodeWav(new Float32Array(16000).fill(0.1), 16000), 128);
    expect(oneSecond).toMatchObject({ windows: 1, frames: [100], windowTokens: [25] });
    expect(oneSecond.data.length).toBe(128 * 3000);
    // 65 s: two full windows and 5 s (500 frames → 125 tokens).
    const long = await audioFeatures(encodeWav(new Float32Array(65 * 16000), 16000), 80);
    expect(long).toMatchObject({
      windows: 3,
      frames: [3000, 3000, 500],
      windowTokens: [750, 750, 125],
    });
    expect(long.data.length).toBe(3 * 80 * 3000);
  });

  // 1.5 s of a 440 Hz tone at 22.05 kHz, encoded with Debian's flac and oggenc (committed
  // fixtures; the decoders under test are the npm wasm ones).
  const fixture = (ext: string) =>
    readFileSync(join(__dirname, '../../../test/fixtures/audio', `tone-1.5s-22k.${ext}`));

  it.each(['flac', 'ogg', 'mp3'])(
    'decodes %s: its frames give the exact length before decoding, and the tone survives',
    async (ext) => {
      const file = fixture(ext);
      const info = audioInfo(file);
      expect(info).toMatchObject({ sampleRate: 22050, frames: 33075 });
      const decoded = await decodeAudio(file);
      expect(decoded.samples.length).toBe(info.frames);
      // 440 Hz over 1.5 s: ~1320 zero crossings.
      let crossings = 0;
      const x = decoded.samples;
      for (let i = 1; i < x.length; i++) if (x[i - 1]! < 0 !== x[i]! < 0) crossings++;
      expect(crossings).toBeGreaterThan(1300);
      expect(crossings).toBeLessThan(1340);
      // The plan's tokens are the features' tokens: 1.5 s → 150 frames → 37.
      expect(audioTokens(info.frames, info.sampleRate)).toBe(37);
      expect((await audioFeatures(file, 128)).windowTokens).toEqual([37]);
    },
  );

  it('refuses a corrupt or truncated stream with a message that says which', async () => {
    const flac = fixture('flac');
    const cut = flac.subarray(0, 200); // STREAMINFO and nothing else
    expect(() => audioInfo(cut)).toThrow(/no audio frames in the flac stream|unreadable flac/);
    await expect(decodeAudio(Buffer.from('OggS but not really'))).rejects.toThrow(/Ogg|vorbis/);
  });

  it('names what is wrong with a bad file', () => {
    expect(() => decodeWav(Buffer.from('not a wav file at all'))).toThrow('not a RIFF/WAVE file');
    const noData = encodeWav(new Float32Array(4), 16000).subarray(0, 36);
    expect(() => decodeWav(noData)).toThrow('missing data chunk');
  });
});
