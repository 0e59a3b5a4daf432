import sharp from 'sharp';
import { canvasBombGif, lyingWav } from '../../../test/support/amplification';
import { MMError } from '../../common/errors/mm-error';
import { encodeWav, wavInfo } from '../../media/audio/wav';
import { audioTokens } from './audio';
import preprocess, { plan } from './preprocess.worker';
import type { MediaPlan, PreprocessTask } from './preprocess.types';
import { checkItemCount, checkPlan } from './request-caps';
import { DEFAULT_GEOMETRY } from '../../common/vision-geometry';

const task = (modality: PreprocessTask['modality'], items: Uint8Array[]): PreprocessTask => ({
  modality,
  items,
  nMels: 128,
  geometry: DEFAULT_GEOMETRY,
  minPixels: 3136,
  maxPixels: 1003520,
  maxVideoFrames: 8,
  maxDecodedPixels: 2 ** 27,
});

const png = (w: number, h: number, channels: 3 | 4 = 3) =>
  sharp({
    create: { width: w, height: h, channels, background: { r: 9, g: 99, b: 199, alpha: 1 } },
  })
    .png()
    .toBuffer();

/**
 * The plan reads only headers, yet the caps and the staging reservation rely on it being
 * exact: every case checks that the decode produces the tokens the plan promised.
 */
describe('media plan (headers only) agrees with the decode', () => {
  it.each([
    [
      'a 1024x768 JPEG',
      () =>
        sharp({ create: { width: 1024, height: 768, channels: 3, background: 'red' } })
          .jpeg()
          .toBuffer(),
    ],
    ['an odd 333x71 PNG with alpha', () => png(333, 71, 4)],
    ['a tiny 10x10 PNG (upsized)', () => png(10, 10)],
  ])('image: %s', async (_name, make) => {
    const items = [await make(), await png(224, 224)];
    const p = (await plan(task('image', items))) as MediaPlan;
    const pre = await preprocess(task('image', items));
    expect(p.ok && pre.ok).toBe(true);
    expect(p.tokens).toBe(pre.ok ? pre.tokens : -1);
    expect(p.decodedPixels).toBeGreaterThan(224 * 224);
    // The working-memory budget (N2) reserves exactly the model input the decode makes.
    expect(p.inputBytes).toBe(pre.ok ? pre.data.byteLength : -1);
  });

  it("image: given the plan's sizes, the preprocessing reads no header again and gives the same values", async () => {
    const items = [
      await sharp({ create: { width: 1024, height: 768, channels: 3, background: 'teal' } })
        .jpeg()
        .toBuffer(),
      await png(333, 71, 4),
    ];
    const p = (await plan(task('image', items))) as MediaPlan;
    expect(p.itemSizes).toEqual([
      [756, 1036],
      [84, 336],
    ]);
    const probed = await preprocess(task('image', items));
    const metadata = jest.spyOn(sharp.prototype, 'metadata');
    try {
      const planned = await preprocess({ ...task('image', items), sizes: p.itemSizes });
      expect(metadata).not.toHaveBeenCalled();
      expect(planned.ok && probed.ok).toBe(true);
      if (planned.ok && probed.ok) {
        expect(planned.grids).toEqual(probed.grids);
        const bytes = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
        expect(planned.data.length).toBe(probed.data.length);
        expect(bytes(planned.data).equals(bytes(probed.data))).toBe(true);
      }
    } finally {
      metadata.mockRestore();
    }
  });

  it('video: an animated GIF longer than EPD_MAX_VIDEO_FRAMES is sampled, and only the kept frames count', async () => {
    const gif = canvasBombGif(300, 200, 21);
    const p = (await plan(task('video', [gif]))) as MediaPlan;
    const pre = await preprocess(task('video', [gif]));
    expect(p).toMatchObject({ ok: true, sourceFrames: 21, keptFrames: 8 });
    expect(p.decodedPixels).toBe(8 * 300 * 200);
    expect(pre.ok && pre.tokens).toBe(p.tokens);
    expect(pre.ok && pre.grids).toEqual([[4, 14, 22]]);
    expect(p.inputBytes).toBe(pre.ok ? pre.data.byteLength : -1);
  });

  it('video: a list of frames and animated items, in order', async () => {
    const items = [await png(112, 112), canvasBombGif(112, 112, 3), await png(112, 112)];
    const p = (await plan(task('video', items))) as MediaPlan;
    const pre = await preprocess(task('video', items));
    expect(p).toMatchObject({ sourceFrames: 5, keptFrames: 5 });
    expect(pre.ok && pre.tokens).toBe(p.tokens);
  });

  it.each([8000, 11025, 16000, 22050, 44100, 48000, 192000])(
    'audio: a 2.37 s WAV at %i Hz plans the tokens audioFeatures gives',
    async (rate) => {
      const wav = encodeWav(new Float32Array(Math.round(2.37 * rate)).fill(0.1), rate);
      const p = (await plan(task('audio', [wav]))) as MediaPlan;
      const pre = await preprocess(task('audio', [wav]));
      expect(pre.ok && pre.tokens).toBe(p.tokens);
      expect(p.audioSeconds).toBeCloseTo(2.37, 3);
      expect(p.inputBytes).toBe(pre.ok ? pre.data.byteLength : -1);
    },
  );
});

describe('lying headers', () => {
  it.each([1, 7999, 192001, 4_000_000_000])('refuses a WAV that claims %i Hz', (rate) => {
    expect(() => wavInfo(lyingWav(2000, rate))).toThrow(
      `sample rate ${rate} Hz is outside 8000–192000 Hz`,
    );
  });

  it('refuses the 2 KB 1 Hz WAV at plan time, as a load failure of its item', async () => {
    expect(await plan(task('audio', [lyingWav(2000)]))).toMatchObject({
      ok: false,
      stage: 'load',
      itemIndex: 0,
      message: 'sample rate 1 Hz is outside 8000–192000 Hz',
    });
  });

  it('counts a WAV by the bytes present, not by what its data chunk claims', () => {
    const wav = lyingWav(1600, 16000);
    wav.writeUInt32LE(0xffffffff, 40); // data chunk "4 GB"
    expect(wavInfo(wav).frames).toBe(1600);
    // 0.1 s: 10 mel frames → ((10 − 1) // 2 + 1 − 2) // 2 + 1 = 2 tokens.
    expect(audioTokens(1600, 16000)).toBe(2);
  });

  it('plans a 260-frame canvas bomb from its header without decoding it', async () => {
    const p = (await plan({
      ...task('video', [canvasBombGif(1000, 1000, 260)]),
      maxVideoFrames: 64,
    })) as MediaPlan;
    expect(p).toMatchObject({ ok: true, sourceFrames: 260, keptFrames: 64, tokens: 39200 });
  });
});

describe('request caps', () => {
  const caps = {
    maxItems: 32,
    maxTokensPerRequest: 16384,
    maxDecodedPixels: 2 ** 27,
    maxAudioSeconds: 600,
    maxDecodedAudioBytes: 2 ** 27,
  };
  const plan0: MediaPlan = {
    ok: true,
    tokens: 10,
    itemTokens: [10],
    itemSizes: [],
    decodedPixels: 10,
    sourceFrames: 0,
    keptFrames: 0,
    audioSeconds: 0,
    decodedAudioBytes: 0,
    inputBytes: 0,
  };
  const refusal = (f: () => void): MMError => {
    try {
      f();
    } catch (err) {
      return err as MMError;
    }
    throw new Error('not refused');
  };

  it('passes what fits every cap', () => {
    expect(() => checkPlan(plan0, caps, 'r')).not.toThrow();
    expect(() => checkItemCount(32, caps, 'r')).not.toThrow();
  });

  it.each([
    [
      { tokens: 16385 },
      'request has 16385 tokens, more than the limit of 16384 (EPD_MAX_TOKENS_PER_REQUEST)',
    ],
    [
      { decodedPixels: 2 ** 27 + 1 },
      `request has ${2 ** 27 + 1} decoded pixels, more than the limit of ${2 ** 27} (EPD_MAX_DECODED_PIXELS)`,
    ],
    [
      { audioSeconds: 600.04 },
      'request has 600.04 seconds of audio, more than the limit of 600 (EPD_MAX_AUDIO_SECONDS)',
    ],
    [
      { decodedAudioBytes: 2 ** 27 + 1 },
      `request has ${2 ** 27 + 1} bytes of decoded audio, more than the limit of ${2 ** 27} (EPD_MAX_DECODED_AUDIO_BYTES)`,
    ],
  ])('refuses %j with 413 naming the cap and its variable', (over, message) => {
    const err = refusal(() => checkPlan({ ...plan0, ...over }, caps, 'r'));
    expect(err).toBeInstanceOf(MMError);
    expect(err.code).toBe(413);
    expect(err.message).toBe(message);
    expect(err.reqId).toBe('r');
  });

  it('compares durations exactly: 600.004 s is over a 600 s cap', () => {
    expect(() => checkPlan({ ...plan0, audioSeconds: 600.004 }, caps, 'r')).toThrow(
      'request has 600 seconds of audio, more than the limit of 600 (EPD_MAX_AUDIO_SECONDS)',
    );
  });

  it('refuses more items than EPD_MAX_ITEMS before anything is loaded', () => {
    expect(refusal(() => checkItemCount(33, caps, 'r')).message).toBe(
      'request has 33 mm_items, more than the limit of 32 (EPD_MAX_ITEMS)',
    );
  });
});
