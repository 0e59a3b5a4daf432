import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readModelDir } from './model-dir';

const PRE = {
  patch_size: 14,
  temporal_patch_size: 2,
  merge_size: 2,
  image_mean: [0.48145466, 0.4578275, 0.40821073],
  image_std: [0.26862954, 0.26130258, 0.27577711],
};

function dir(pre: object, config: object, name = 'm'): string {
  const d = join(mkdtempSync(join(tmpdir(), 'modeldir-')), name);
  mkdirSync(d);
  writeFileSync(join(d, 'preprocessor_config.json'), JSON.stringify(pre));
  writeFileSync(join(d, 'config.json'), JSON.stringify(config));
  writeFileSync(join(d, 'vision-encoder.onnx'), '');
  return d;
}

describe('readModelDir', () => {
  it("reads Qwen2.5-VL's width (out_hidden_size) and min/max pixels written as size", () => {
    const d = dir(
      { ...PRE, size: { shortest_edge: 3136, longest_edge: 12845056 } },
      { model_type: 'qwen2_5_vl', vision_config: { out_hidden_size: 2048, hidden_size: 1280 } },
      'qwen25',
    );
    expect(readModelDir(d, '/')).toMatchObject({
      name: 'qwen25',
      family: 'qwen2.5-vl',
      width: 2048,
      minPixels: 3136,
      maxPixels: 12845056,
    });
  });

  it('refuses min/max pixels that contradict size, and min above max', () => {
    const cfg = { model_type: 'qwen2_vl', vision_config: { hidden_size: 1536 } };
    expect(() =>
      readModelDir(
        dir({ ...PRE, min_pixels: 1, max_pixels: 9, size: { shortest_edge: 2 } }, cfg),
        '/',
      ),
    ).toThrow(/min_pixels=1 contradicts size\.shortest_edge=2/);
    expect(() => readModelDir(dir({ ...PRE, min_pixels: 10, max_pixels: 9 }, cfg), '/')).toThrow(
      /min_pixels=10 exceeds max_pixels=9/,
    );
  });

  it('names the missing width and the missing tower', () => {
    expect(() =>
      readModelDir(
        dir(
          { ...PRE, min_pixels: 1, max_pixels: 9 },
          { model_type: 'qwen2_5_vl', vision_config: {} },
        ),
        '/',
      ),
    ).toThrow(/config\.json: vision_config\.out_hidden_size is missing/);
  });
});
