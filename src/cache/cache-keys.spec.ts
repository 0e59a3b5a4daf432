import { cacheUnits, type Fingerprint } from './cache-keys';

const fp: Fingerprint = {
  modality: 'image',
  model: 'm1',
  minPixels: 3136,
  maxPixels: 1003520,
  maxVideoFrames: 64,
  stagingDtype: 'float32',
};
const a = new Uint8Array([1, 2, 3]);
const b = new Uint8Array([4, 5, 6]);

describe('cache keys', () => {
  it('keys images one per item, by their bytes', () => {
    const units = cacheUnits(fp, [a, b, a]);
    expect(units.map((u) => u.items)).toEqual([[0], [1], [2]]);
    expect(units[0]!.key).toBe(units[2]!.key);
    expect(units[0]!.key).not.toBe(units[1]!.key);
  });

  it('misses when the model or a preprocessing setting changes', () => {
    const [base] = cacheUnits(fp, [a]);
    for (const changed of [
      { model: 'm2' },
      { minPixels: 6272 },
      { maxPixels: 802816 },
      { stagingDtype: 'bfloat16' },
      { modality: 'audio' },
    ]) {
      expect(cacheUnits({ ...fp, ...changed }, [a])[0]!.key).not.toBe(base!.key);
    }
  });

  it('keys a video or an audio request as one unit of all its items, in order', () => {
    const video = { ...fp, modality: 'video' };
    const [ab] = cacheUnits(video, [a, b]);
    const [ba] = cacheUnits(video, [b, a]);
    expect(ab!.items).toEqual([0, 1]);
    expect(ab!.key).not.toBe(ba!.key);
  });
});
