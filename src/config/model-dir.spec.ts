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

  it("reads Qwen3-VL's geometry from the files, and its width as out_hidden_size × (1 + DeepStack layers)", () => {
    const d = dir(
      {
        patch_size: 16,
        temporal_patch_size: 2,
        merge_size: 2,
        image_mean: [0.5, 0.5, 0.5],
        image_std: [0.5, 0.5, 0.5],
        size: { shortest_edge: 65536, longest_edge: 16777216 },
      },
      {
        model_type: 'qwen3_vl',
        vision_config: { out_hidden_size: 2560, deepstack_visual_indexes: [5, 11, 17] },
      },
    );
    expect(readModelDir(d, '/')).toMatchObject({
      family: 'qwen3-vl',
      width: 10240,
      minPixels: 65536,
      maxPixels: 16777216,
      geometry: {
        patchSize: 16,
        mergeSize: 2,
        temporalPatchSize: 2,
        imageMean: [0.5, 0.5, 0.5],
        imageStd: [0.5, 0.5, 0.5],
      },
    });
    const moe = dir(
      { ...PRE, patch_size: 16, min_pixels: 1, max_pixels: 9 },
      {
        model_type: 'qwen3_vl_moe',
        vision_config: { out_hidden_size: 2048, deepstack_visual_indexes: [] },
      },
    );
    expect(readModelDir(moe, '/')).toMatchObject({ family: 'qwen3-vl-moe', width: 2048 });
    expect(() =>
      readModelDir(
        dir(
          { ...PRE, min_pixels: 1, max_pixels: 9 },
          {
            model_type: 'qwen3_vl',
            vision_config: { out_hidden_size: 8, deepstack_visual_indexes: 'x' },
          },
        ),
        '/',
      ),
    ).toThrow(/deepstack_visual_indexes must be a list of layer indexes/);
  });

  it('refuses a temporal patch other than 2 and a patch size beyond the bound', () => {
    const cfg = { model_type: 'qwen2_vl', vision_config: { hidden_size: 1536 } };
    expect(() =>
      readModelDir(dir({ ...PRE, temporal_patch_size: 3, min_pixels: 1, max_pixels: 9 }, cfg), '/'),
    ).toThrow(/temporal_patch_size=3: this encoder's patch layout writes 2 frames per patch/);
    expect(() =>
      readModelDir(dir({ ...PRE, patch_size: 100, min_pixels: 1, max_pixels: 9 }, cfg), '/'),
    ).toThrow(/patch_size=100: at most 64 is supported/);
  });
});
