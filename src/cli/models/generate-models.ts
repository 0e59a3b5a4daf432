import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { referenceModelPaths } from '../../config/model-paths';
import { QWEN3_VL_GEOMETRY, type VisionGeometry } from '../../common/vision-geometry';
import {
  buildAudioModel,
  buildDeepStackVisionModel,
  buildTiledVisionModel,
  buildVisionModel,
} from './reference-models';

export interface GeneratedModel {
  path: string;
  bytes: number;
  sha256: string;
  written: boolean;
}

const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

/**
 * Writes the model unless the file already holds exactly these bytes (deterministic, so
 * a model left by an older contract is replaced instead of refused at start-up).
 */
function write(path: string, build: () => Uint8Array, force: boolean): GeneratedModel {
  const bytes = build();
  const sha256 = sha(bytes);
  if (!force && existsSync(path) && sha(readFileSync(path)) === sha256)
    return { path, bytes: bytes.length, sha256, written: false };
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, bytes);
  renameSync(tmp, path); // atomic: a concurrent reader never sees half a model
  return { path, bytes: bytes.length, sha256, written: true };
}

/** Writes the reference models (fixed seed) where the service looks for them, unless current. */
export function ensureReferenceModels(
  options: { force?: boolean; dim?: number } = {},
): GeneratedModel[] {
  const { vision, audio } = referenceModelPaths();
  const dim = options.dim ?? 1024;
  return [
    write(vision, () => buildVisionModel(dim), options.force ?? false),
    write(audio, () => buildAudioModel(dim), options.force ?? false),
  ];
}

/** A vision model of another width in `dir` (tests and benchmarks that need a slower forward). */
export function writeVisionModel(dir: string, dim: number): string {
  const path = join(dir, `vision-encoder-${dim}.onnx`);
  write(path, () => buildVisionModel(dim), false);
  return path;
}

/**
 * The reference model directory of each family (EPD_MODEL_DIR's layout): a tower with the
 * family's contract and the checkpoint's width, generated from the fixed seed, beside the
 * preprocessing and config values of the published checkpoint:
 * - Qwen/Qwen2-VL-2B-Instruct: min/max pixels, patch 14, merge 2, temporal patch 2, CLIP
 *   mean/std, merger width 1536;
 * - Qwen/Qwen2.5-VL-3B-Instruct: Qwen2-VL's image processor values (patch 14, merge 2,
 *   CLIP mean/std, 3,136–12,845,056 pixels), out_hidden_size 2048;
 * - Qwen/Qwen3-VL-4B-Instruct: size 65,536–16,777,216 pixels, patch 16, merge 2, temporal
 *   patch 2, mean/std 0.5, out_hidden_size 2560 with DeepStack layers [5, 11, 17], so rows
 *   2560 × 4 = 10,240 wide; its video processor's bounds 4,096–25,165,824 pixels over all
 *   frames;
 * - OpenGVLab/InternVL3-1B-hf (transformers' conversion of InternVL3-1B): 448-pixel tiles,
 *   1 to 12 with a thumbnail, ImageNet mean/std, patch 14, downsample_ratio 0.5 (256 tokens a
 *   tile), projector width 896 (text_config.hidden_size, Qwen2.5-0.5B's).
 */
/** InternVL3's tiling, as its directory states it (read back by config/model-dir.ts). */
const INTERNVL3_GEOMETRY: VisionGeometry = {
  patchSize: 14,
  mergeSize: 2,
  temporalPatchSize: 1,
  imageMean: [0.485, 0.456, 0.406],
  imageStd: [0.229, 0.224, 0.225],
  tiling: { size: 448, minTiles: 1, maxTiles: 12, thumbnail: true },
};

/** Qwen2-VL's image processor as its checkpoints state it; Qwen2.5-VL's are the same values. */
const QWEN2_VL_IMAGE_PROCESSOR = {
  min_pixels: 3136,
  max_pixels: 12845056,
  patch_size: 14,
  temporal_patch_size: 2,
  merge_size: 2,
  image_mean: [0.48145466, 0.4578275, 0.40821073],
  image_std: [0.26862954, 0.26130258, 0.27577711],
  image_processor_type: 'Qwen2VLImageProcessor',
} as const;

export const REFERENCE_MODEL_DIRS = {
  'qwen2-vl-2b-reference': {
    build: () => buildVisionModel(1536),
    preprocessor: { ...QWEN2_VL_IMAGE_PROCESSOR, processor_class: 'Qwen2VLProcessor' },
    config: {
      architectures: ['Qwen2VLForConditionalGeneration'],
      model_type: 'qwen2_vl',
      hidden_size: 1536,
      vision_config: {
        depth: 32,
        embed_dim: 1280,
        mlp_ratio: 4,
        num_heads: 16,
        in_chans: 3,
        hidden_size: 1536,
        patch_size: 14,
        spatial_merge_size: 2,
        spatial_patch_size: 14,
        temporal_patch_size: 2,
      },
    },
  },
  'qwen2.5-vl-3b-reference': {
    build: () => buildVisionModel(2048),
    preprocessor: { ...QWEN2_VL_IMAGE_PROCESSOR, processor_class: 'Qwen2_5_VLProcessor' },
    config: {
      architectures: ['Qwen2_5_VLForConditionalGeneration'],
      model_type: 'qwen2_5_vl',
      hidden_size: 2048,
      vision_config: {
        depth: 32,
        hidden_act: 'silu',
        hidden_size: 1280,
        intermediate_size: 3420,
        num_heads: 16,
        in_chans: 3,
        out_hidden_size: 2048,
        patch_size: 14,
        spatial_merge_size: 2,
        spatial_patch_size: 14,
        window_size: 112,
        fullatt_block_indexes: [7, 15, 23, 31],
        tokens_per_second: 2,
        temporal_patch_size: 2,
      },
    },
  },
  'qwen3-vl-4b-reference': {
    build: () => buildDeepStackVisionModel(QWEN3_VL_GEOMETRY, 2560, 3),
    preprocessor: {
      size: { longest_edge: 16777216, shortest_edge: 65536 },
      patch_size: 16,
      temporal_patch_size: 2,
      merge_size: 2,
      image_mean: [0.5, 0.5, 0.5],
      image_std: [0.5, 0.5, 0.5],
      processor_class: 'Qwen3VLProcessor',
      image_processor_type: 'Qwen2VLImageProcessorFast',
    },
    // The video processor's own bounds: every kept frame counts (4,096–25,165,824 pixels).
    video: {
      size: { longest_edge: 25165824, shortest_edge: 4096 },
      patch_size: 16,
      temporal_patch_size: 2,
      merge_size: 2,
      image_mean: [0.5, 0.5, 0.5],
      image_std: [0.5, 0.5, 0.5],
      processor_class: 'Qwen3VLProcessor',
      video_processor_type: 'Qwen3VLVideoProcessor',
    },
    config: {
      architectures: ['Qwen3VLForConditionalGeneration'],
      model_type: 'qwen3_vl',
      image_token_id: 151655,
      video_token_id: 151656,
      vision_start_token_id: 151652,
      vision_end_token_id: 151653,
      text_config: { model_type: 'qwen3_vl_text', hidden_size: 2560 },
      vision_config: {
        model_type: 'qwen3_vl',
        deepstack_visual_indexes: [5, 11, 17],
        depth: 24,
        hidden_act: 'gelu_pytorch_tanh',
        hidden_size: 1024,
        in_channels: 3,
        intermediate_size: 4096,
        num_heads: 16,
        num_position_embeddings: 2304,
        out_hidden_size: 2560,
        patch_size: 16,
        spatial_merge_size: 2,
        temporal_patch_size: 2,
      },
    },
  },
  'internvl3-1b-reference': {
    build: () => buildTiledVisionModel(INTERNVL3_GEOMETRY, 896),
    // As transformers' conversion script writes it (GotOcr2ImageProcessorFast's saved
    // attributes; crop_to_patches is the image processor's default, which InternVLProcessor
    // overrides to true).
    preprocessor: {
      crop_to_patches: false,
      data_format: 'channels_first',
      default_to_square: true,
      do_convert_rgb: true,
      do_normalize: true,
      do_rescale: true,
      do_resize: true,
      image_mean: [0.485, 0.456, 0.406],
      image_processor_type: 'GotOcr2ImageProcessorFast',
      image_std: [0.229, 0.224, 0.225],
      max_patches: 12,
      min_patches: 1,
      processor_class: 'InternVLProcessor',
      resample: 3,
      rescale_factor: 0.00392156862745098,
      size: { height: 448, width: 448 },
    },
    // Its video processor: each frame one 448 tile, ImageNet mean/std.
    video: {
      do_convert_rgb: true,
      do_normalize: true,
      do_rescale: true,
      do_resize: true,
      image_mean: [0.485, 0.456, 0.406],
      image_std: [0.229, 0.224, 0.225],
      initial_shift: true,
      processor_class: 'InternVLProcessor',
      resample: 3,
      rescale_factor: 0.00392156862745098,
      size: { height: 448, width: 448 },
      video_processor_type: 'InternVLVideoProcessor',
    },
    config: {
      architectures: ['InternVLForConditionalGeneration'],
      model_type: 'internvl',
      downsample_ratio: 0.5,
      image_seq_length: 256,
      image_token_id: 151667,
      projector_hidden_act: 'gelu',
      vision_feature_layer: -1,
      vision_feature_select_strategy: 'default',
      text_config: { model_type: 'qwen2', hidden_size: 896 },
      vision_config: {
        model_type: 'internvl_vision',
        hidden_size: 1024,
        image_size: [448, 448],
        intermediate_size: 4096,
        num_attention_heads: 16,
        num_hidden_layers: 24,
        patch_size: [14, 14],
        use_absolute_position_embeddings: true,
        use_mean_pooling: true,
      },
    },
  },
} as const;

export function ensureReferenceModelDirs(options: { force?: boolean } = {}): GeneratedModel[] {
  const root = dirname(referenceModelPaths().vision);
  const out: GeneratedModel[] = [];
  for (const [name, spec] of Object.entries(REFERENCE_MODEL_DIRS)) {
    const dir = join(root, name);
    out.push(write(join(dir, 'vision-encoder.onnx'), spec.build, options.force ?? false));
    const files: [string, object][] = [
      ['preprocessor_config.json', spec.preprocessor],
      ['config.json', spec.config],
    ];
    if ('video' in spec) files.push(['video_preprocessor_config.json', spec.video]);
    for (const [file, value] of files) {
      const text = `${JSON.stringify(value, null, 2)}\n`;
      out.push(write(join(dir, file), () => Buffer.from(text), options.force ?? false));
    }
  }
  return out;
}
