import { existsSync, statSync } from 'node:fs';
import { basename, isAbsolute, join, resolve } from 'node:path';
import { projectRoot } from '../common/fs/project-root';
import { referenceModelPaths } from './model-paths';
import {
  DEFAULT_GEOMETRY,
  TEMPORAL_PATCH,
  tokensPerTile,
  type VideoBounds,
  type VisionGeometry,
} from '../common/vision-geometry';

import {
  MAX_MERGE,
  MAX_PATCH,
  MODEL_DIR_FILES,
  ModelDirError,
  isInt,
  normalisation,
  oneInteger,
  pixelBounds,
  readJson,
  type Json,
  type ModelDir,
} from './model-dir-files';
import { readTiledDir } from './model-dir-tiled';

export { MODEL_DIR_FILES, ModelDirError, type ModelDir } from './model-dir-files';

/** EPD_AUDIO_MODEL_PATH's value for "no audio model": audio requests are refused (400). */
export const NO_AUDIO_MODEL = 'none';

/** A family this encoder serves: its name, and how its config.json states the embedding width. */
interface Family {
  name: string;
  /** Its video processor has bounds of its own (video_preprocessor_config.json): Qwen3-VL. */
  videoBounds?: boolean;
  /** The width of one embedding row (what the tower must output), and the key it came from. */
  width(v: Json, cfgFile: string): number;
}

/** vision_config.<key>: a positive integer, or a start-stopping error naming the file and key. */
function visionInt(v: Json, key: string, cfgFile: string, what: string): number {
  const value = v[key];
  if (value === undefined)
    throw new ModelDirError(`${cfgFile}: vision_config.${key} is missing (${what})`);
  if (!isInt(value))
    throw new ModelDirError(`${cfgFile}: vision_config.${key} must be a positive integer`);
  return value;
}

/**
 * The families whose preprocessing this encoder does, by config.json's model_type. Qwen2-VL's
 * merger projects to vision_config.hidden_size (the language model's width); Qwen2.5-VL
 * names it out_hidden_size; Qwen3-VL concatenates its DeepStack features (one per entry of
 * deepstack_visual_indexes) to the merged output on the last dimension, so a row is
 * out_hidden_size × (1 + len(deepstack_visual_indexes)) wide.
 */
const QWEN3_VL: Family = {
  name: 'qwen3-vl',
  videoBounds: true,
  width(v, cfgFile) {
    const out = visionInt(v, 'out_hidden_size', cfgFile, 'the merged output width');
    const deepstack = v.deepstack_visual_indexes;
    if (deepstack === undefined)
      throw new ModelDirError(
        `${cfgFile}: vision_config.deepstack_visual_indexes is missing (the DeepStack features concatenated to the width)`,
      );
    if (!Array.isArray(deepstack) || !deepstack.every((i) => Number.isInteger(i) && i >= 0))
      throw new ModelDirError(
        `${cfgFile}: vision_config.deepstack_visual_indexes must be a list of layer indexes`,
      );
    return out * (1 + deepstack.length);
  },
};
const FAMILIES: Readonly<Record<string, Family>> = {
  qwen2_vl: {
    name: 'qwen2-vl',
    width: (v, f) => visionInt(v, 'hidden_size', f, 'the embedding width'),
  },
  qwen2_5_vl: {
    name: 'qwen2.5-vl',
    width: (v, f) => visionInt(v, 'out_hidden_size', f, 'the embedding width'),
  },
  qwen3_vl: QWEN3_VL,
  qwen3_vl_moe: { ...QWEN3_VL, name: 'qwen3-vl-moe' },
};
/** Tiling families (their own reader: readTiledDir). */
const TILED_FAMILIES: Readonly<Record<string, string>> = { internvl: 'internvl' };
/** Families users ask for that do not fit yet, and why. */
const NOT_YET: Readonly<Record<string, string>> = {
  internvl_chat:
    'the original remote-code checkpoint; serve its transformers conversion (model_type internvl, such as OpenGVLab/InternVL3-1B-hf), whose preprocessor_config.json states the tiling',
};
/**
 * Reads a model directory (EPD_MODEL_DIR): the ONNX tower (`vision-encoder.onnx`, and
 * `audio-encoder.onnx` when the family takes audio) beside the checkpoint's unmodified
 * `preprocessor_config.json` and `config.json`. Patch, merge and temporal patch sizes,
 * mean, std, resample, min/max pixels and the output width come from those files; a value
 * the family needs that is missing, contradicts the other file, or differs from what this
 * encoder's preprocessing does, stops the start with the file and the key.
 */
export function readModelDir(configured: string, cwd: string): ModelDir {
  const dir = isAbsolute(configured) ? configured : resolve(cwd, configured);
  if (!existsSync(dir) || !statSync(dir).isDirectory())
    throw new ModelDirError(`EPD_MODEL_DIR ${dir} is not a directory`);
  const pre = readJson(dir, MODEL_DIR_FILES.preprocessor);
  const cfg = readJson(dir, MODEL_DIR_FILES.config);
  const preFile = join(dir, MODEL_DIR_FILES.preprocessor);
  const cfgFile = join(dir, MODEL_DIR_FILES.config);

  const modelType = cfg.model_type;
  if (typeof modelType !== 'string')
    throw new ModelDirError(`${cfgFile}: model_type is missing (it names the model family)`);
  if (TILED_FAMILIES[modelType])
    return readTiledDir(dir, TILED_FAMILIES[modelType], pre, cfg, preFile, cfgFile);
  const fam = FAMILIES[modelType];
  if (!fam) {
    const why = NOT_YET[modelType];
    throw new ModelDirError(
      `${cfgFile}: model_type "${modelType}" is not a family this encoder serves yet` +
        `${why ? ` (${why})` : ''}; it serves ${[...Object.keys(FAMILIES), ...Object.keys(TILED_FAMILIES)].join(', ')}`,
    );
  }
  const vision = cfg.vision_config;
  if (typeof vision !== 'object' || vision === null)
    throw new ModelDirError(`${cfgFile}: vision_config is missing`);
  const v = vision as Json;
  const family = fam.name;

  /** One integer both files may state: it must be there, agree, and lie within `max`. */
  const geometry = (preKey: string, cfgKey: string, max: number): number => {
    const cfgAt = `${cfgFile}: vision_config.${cfgKey}`;
    const { value, at } = oneInteger(
      { at: `${preFile}: ${preKey}`, value: pre[preKey] },
      { at: cfgAt, named: cfgAt, value: v[cfgKey] },
      `${preFile}: ${preKey} is missing (nor is vision_config.${cfgKey} in ${cfgFile})`,
    );
    if (value > max) throw new ModelDirError(`${at}=${value}: at most ${max} is supported`);
    return value;
  };
  const patchSize = geometry('patch_size', 'patch_size', MAX_PATCH);
  const mergeSize = geometry('merge_size', 'spatial_merge_size', MAX_MERGE);
  const temporalPatchSize = geometry('temporal_patch_size', 'temporal_patch_size', MAX_MERGE);
  if (temporalPatchSize !== TEMPORAL_PATCH)
    throw new ModelDirError(
      `${preFile}: temporal_patch_size=${temporalPatchSize}: this encoder's patch layout writes ${TEMPORAL_PATCH} frames per patch`,
    );

  const { imageMean, imageStd } = normalisation(pre, preFile);

  // min/max pixels: the processor's own keys, or `size` as newer transformers write it.
  const { minPixels, maxPixels } = pixelBounds(pre, preFile, 'keys');

  const width = fam.width(v, cfgFile);

  const visionPath = join(dir, MODEL_DIR_FILES.vision);
  if (!existsSync(visionPath))
    throw new ModelDirError(`${visionPath} is missing (the ONNX vision tower)`);
  const audioPath = join(dir, MODEL_DIR_FILES.audio);
  const videoFile = join(dir, MODEL_DIR_FILES.video);
  const video =
    fam.videoBounds && existsSync(videoFile)
      ? readVideoBounds(readJson(dir, MODEL_DIR_FILES.video), videoFile, {
          patchSize,
          mergeSize,
          temporalPatchSize,
        })
      : undefined;
  return {
    ...(video ? { video } : {}),
    dir,
    name: basename(dir),
    family,
    visionPath,
    ...(existsSync(audioPath) ? { audioPath } : {}),
    width,
    minPixels,
    maxPixels,
    geometry: Object.freeze({ patchSize, mergeSize, temporalPatchSize, imageMean, imageStd }),
  };
}

/**
 * Qwen3-VL's video processor (video_preprocessor_config.json): its pixel bounds
 * (`size.shortest_edge` / `size.longest_edge`, or `min_pixels` / `max_pixels`), its mean and
 * std, `cap_pixels_per_frame`; a patch, merge or temporal patch it states must be the image
 * processor's (one tower reads both).
 */
function readVideoBounds(
  pre: Json,
  file: string,
  image: { patchSize: number; mergeSize: number; temporalPatchSize: number },
): VideoBounds {
  for (const [key, value] of [
    ['patch_size', image.patchSize],
    ['merge_size', image.mergeSize],
    ['temporal_patch_size', image.temporalPatchSize],
  ] as const)
    if (pre[key] !== undefined && pre[key] !== value)
      throw new ModelDirError(
        `${file}: ${key}=${JSON.stringify(pre[key])} contradicts the image processor's ${value}`,
      );
  const { minPixels, maxPixels } = pixelBounds(pre, file, 'size');
  const cap = pre.cap_pixels_per_frame;
  if (cap !== undefined && cap !== null && typeof cap !== 'boolean')
    throw new ModelDirError(`${file}: cap_pixels_per_frame must be true or false`);
  const { imageMean, imageStd } = normalisation(pre, file);
  return Object.freeze({
    minPixels,
    maxPixels,
    capPixelsPerFrame: cap === true,
    imageMean,
    imageStd,
  });
}

/**
 * EPD_MODEL_DIR's entries: comma-separated, each a directory or `name=directory` (the name
 * requests choose it by: vLLM callers send the checkpoint's id, such as
 * `Qwen/Qwen2.5-VL-7B-Instruct`). The first is the default model.
 */
export function modelDirEntries(configured: string): { name?: string; path: string }[] {
  return configured
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e.length > 0)
    .map((e) => {
      const at = e.indexOf('=');
      return at > 0 ? { name: e.slice(0, at).trim(), path: e.slice(at + 1).trim() } : { path: e };
    });
}

/** Model directories read so far, by EPD_MODEL_DIR as configured (one value per process). */
const read = new Map<string, ModelDir[]>();

/**
 * Every directory EPD_MODEL_DIR names, read (once per process, then remembered), the
 * default first; each named as configured, or by its base name. Two with one name stop the
 * start.
 */
export function readModelDirs(configured: string, cwd: string): ModelDir[] {
  let dirs = read.get(configured);
  if (dirs) return dirs;
  const entries = modelDirEntries(configured);
  if (entries.length === 0) throw new ModelDirError('EPD_MODEL_DIR names no directory');
  dirs = entries.map(({ name, path }) => {
    const dir = readModelDir(path, cwd);
    return name ? { ...dir, name } : dir;
  });
  const names = dirs.map((d) => d.name);
  const twice = names.find((n, i) => names.indexOf(n) !== i);
  if (twice !== undefined)
    throw new ModelDirError(
      `EPD_MODEL_DIR names two models "${twice}": give one a name (name=directory)`,
    );
  read.set(configured, dirs);
  return dirs;
}

/** One vision model this process serves, as requests choose it by `model`. */
export interface VisionModelSpec {
  name: string;
  family: string;
  path: string;
  geometry: VisionGeometry;
  minPixels: number;
  maxPixels: number;
  /** The width its directory's config.json declares (checked against the tower at load). */
  width?: number;
  /** Where the width was read. */
  widthFrom?: string;
  /** Qwen3-VL with a video_preprocessor_config.json: its video bounds. */
  video?: VideoBounds;
}

/**
 * The vision models this process serves, the default first: each directory of
 * EPD_MODEL_DIR, or the one model of EPD_MODEL_PATH. The default model's min/max pixels are
 * the configuration's (its directory's, unless EPD_MIN_PIXELS / EPD_MAX_PIXELS set them);
 * every other model's are its own directory's. Paths are resolved against the project root,
 * as the backend opens them.
 */
export function visionModelsOf(encoder: {
  modelDir?: string | undefined;
  modelPath: string;
  minPixels: number;
  maxPixels: number;
}): VisionModelSpec[] {
  const cwd = projectRoot();
  if (!encoder.modelDir) {
    const path = encoder.modelPath ? resolve(cwd, encoder.modelPath) : referenceModelPaths().vision;
    return [
      {
        name: basename(path).replace(/\.onnx$/, ''),
        family: 'qwen2-vl',
        path,
        geometry: DEFAULT_GEOMETRY,
        minPixels: encoder.minPixels,
        maxPixels: encoder.maxPixels,
      },
    ];
  }
  return readModelDirs(encoder.modelDir, cwd).map((d, i) => ({
    name: d.name,
    family: d.family,
    path: d.visionPath,
    geometry: d.geometry,
    minPixels: i === 0 ? encoder.minPixels : d.minPixels,
    maxPixels: i === 0 ? encoder.maxPixels : d.maxPixels,
    width: d.width,
    widthFrom: join(d.dir, MODEL_DIR_FILES.config),
    ...(d.video ? { video: d.video } : {}),
  }));
}

/** A served model's preprocessing, as the admin routes show it. */
export function preprocessingView(m: VisionModelSpec) {
  return {
    name: m.name,
    family: m.family,
    patch_size: m.geometry.patchSize,
    merge_size: m.geometry.mergeSize,
    image_mean: [...m.geometry.imageMean],
    image_std: [...m.geometry.imageStd],
    min_pixels: m.minPixels,
    max_pixels: m.maxPixels,
    ...(m.video
      ? {
          video: {
            min_pixels: m.video.minPixels,
            max_pixels: m.video.maxPixels,
            cap_pixels_per_frame: m.video.capPixelsPerFrame,
            image_mean: [...m.video.imageMean],
            image_std: [...m.video.imageStd],
          },
        }
      : {}),
    ...(m.geometry.tiling
      ? {
          tiling: {
            tile_size: m.geometry.tiling.size,
            min_tiles: m.geometry.tiling.minTiles,
            max_tiles: m.geometry.tiling.maxTiles,
            thumbnail: m.geometry.tiling.thumbnail,
            tokens_per_tile: tokensPerTile(m.geometry),
          },
        }
      : {}),
  };
}
