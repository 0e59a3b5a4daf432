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

  describe('InternVL (model_type internvl, a tiling family)', () => {
    const IPRE = {
      size: { height: 448, width: 448 },
      min_patches: 1,
      max_patches: 12,
      crop_to_patches: false,
      image_mean: [0.485, 0.456, 0.406],
      image_std: [0.229, 0.224, 0.225],
      resample: 3,
    };
    const ICFG = {
      model_type: 'internvl',
      downsample_ratio: 0.5,
      image_seq_length: 256,
      text_config: { hidden_size: 896 },
      vision_config: { image_size: [448, 448], patch_size: [14, 14], hidden_size: 1024 },
    };
    const with_ = (pre: object, cfg: object) => dir({ ...IPRE, ...pre }, { ...ICFG, ...cfg });

    it("reads the tiling from the files: 448 tiles, 1 to 12 with a thumbnail, 256 tokens a tile, the projector's width", () => {
      expect(readModelDir(with_({}, {}), '/')).toMatchObject({
        family: 'internvl',
        width: 896,
        geometry: {
          patchSize: 14,
          mergeSize: 2,
          imageMean: [0.485, 0.456, 0.406],
          tiling: { size: 448, minTiles: 1, maxTiles: 12, thumbnail: true },
        },
      });
      // The processor's defaults where the file leaves min/max patches out; a lone int size.
      const { min_patches: _a, max_patches: _b, ...bare } = IPRE;
      const d = dir(bare, { ...ICFG, vision_config: { image_size: 448, patch_size: 14 } });
      expect(readModelDir(d, '/').geometry.tiling).toMatchObject({ minTiles: 1, maxTiles: 12 });
    });

    it("reads its video processor's file: one tile a frame, its own mean and std", () => {
      const d = with_({}, {});
      expect(readModelDir(d, '/').video).toBeUndefined();
      const video = {
        size: { height: 448, width: 448 },
        image_mean: [0.485, 0.456, 0.406],
        image_std: [0.229, 0.224, 0.225],
      };
      writeFileSync(join(d, 'video_preprocessor_config.json'), JSON.stringify(video));
      expect(readModelDir(d, '/').video).toMatchObject({
        minPixels: 448 * 448,
        imageMean: [0.485, 0.456, 0.406],
      });
      writeFileSync(
        join(d, 'video_preprocessor_config.json'),
        JSON.stringify({ ...video, size: { height: 384, width: 384 } }),
      );
      expect(() => readModelDir(d, '/')).toThrow(
        /video_preprocessor_config\.json: size must be \{"height": 448, "width": 448\} \(one tile a frame\)/,
      );
    });

    it('names the file and key of what is missing or contradictory', () => {
      expect(() => readModelDir(with_({ size: { height: 448, width: 224 } }, {}), '/')).toThrow(
        /size\.height=448 and size\.width=224 differ: tiles are square/,
      );
      expect(() =>
        readModelDir(
          with_({}, { vision_config: { image_size: [336, 336], patch_size: [14, 14] } }),
          '/',
        ),
      ).toThrow(/size\.height=448 contradicts .*config\.json: vision_config\.image_size=336/);
      expect(() => readModelDir(with_({}, { downsample_ratio: undefined }), '/')).toThrow(
        /config\.json: downsample_ratio is missing/,
      );
      expect(() => readModelDir(with_({}, { downsample_ratio: 0.3 }), '/')).toThrow(
        /downsample_ratio=0\.3: must be 1\/n/,
      );
      expect(() => readModelDir(with_({}, { image_seq_length: 196 }), '/')).toThrow(
        /image_seq_length=196 contradicts \(image_size \/ patch_size\)² × downsample_ratio² = 256/,
      );
      expect(() => readModelDir(with_({}, { text_config: {} }), '/')).toThrow(
        /config\.json: text_config\.hidden_size is missing/,
      );
      expect(() => readModelDir(with_({ min_patches: 13 }, {}), '/')).toThrow(
        /min_patches=13 exceeds max_patches=12/,
      );
      expect(() => readModelDir(with_({ resample: 2 }, {}), '/')).toThrow(
        /resample=2: this encoder resizes with bicubic/,
      );
      expect(() =>
        readModelDir(with_({}, { vision_config: { image_size: 448, patch_size: [14, 16] } }), '/'),
      ).toThrow(/vision_config\.patch_size must be one positive integer or two equal ones/);
    });
  });

  it("reads Qwen3-VL's video processor (video_preprocessor_config.json) where present, and refuses one that contradicts the image processor", () => {
    const pre = { ...PRE, patch_size: 16, size: { shortest_edge: 65536, longest_edge: 16777216 } };
    const cfg = {
      model_type: 'qwen3_vl',
      vision_config: {
        out_hidden_size: 2560,
        deepstack_visual_indexes: [5, 11, 17],
        patch_size: 16,
      },
    };
    const d = dir(pre, cfg, 'q3v');
    expect(readModelDir(d, '/').video).toBeUndefined();
    const video = {
      size: { shortest_edge: 4096, longest_edge: 25165824 },
      patch_size: 16,
      image_mean: [0.5, 0.5, 0.5],
      image_std: [0.5, 0.5, 0.5],
    };
    writeFileSync(join(d, 'video_preprocessor_config.json'), JSON.stringify(video));
    expect(readModelDir(d, '/').video).toEqual({
      minPixels: 4096,
      maxPixels: 25165824,
      capPixelsPerFrame: false,
      imageMean: [0.5, 0.5, 0.5],
      imageStd: [0.5, 0.5, 0.5],
    });
    const bad = dir(pre, cfg, 'q3v-bad');
    writeFileSync(
      join(bad, 'video_preprocessor_config.json'),
      JSON.stringify({ ...video, patch_size: 14 }),
    );
    expect(() => readModelDir(bad, '/')).toThrow(
      /video_preprocessor_config\.json: patch_size=14 contradicts the image processor's 16/,
    );
    writeFileSync(
      join(bad, 'video_preprocessor_config.json'),
      JSON.stringify({ ...video, size: { shortest_edge: 4096 } }),
    );
    expect(() => readModelDir(bad, '/')).toThrow(
      /video_preprocessor_config\.json: size\.longest_edge is missing/,
    );
  });
});
