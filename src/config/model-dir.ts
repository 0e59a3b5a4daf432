import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, isAbsolute, join, resolve } from 'node:path';

/** EPD_AUDIO_MODEL_PATH's value for "no audio model": audio requests are refused (400). */
export const NO_AUDIO_MODEL = 'none';

/** A model directory's files (EPD_MODEL_DIR). */
export const MODEL_DIR_FILES = {
  vision: 'vision-encoder.onnx',
  audio: 'audio-encoder.onnx',
  preprocessor: 'preprocessor_config.json',
  config: 'config.json',
} as const;

/** The families whose preprocessing this encoder does: config.json's model_type → name. */
const FAMILIES: Readonly<Record<string, string>> = {
  qwen2_vl: 'qwen2-vl',
  qwen2_5_vl: 'qwen2.5-vl',
};
/** Families users ask for that do not fit yet, and why. */
const NOT_YET: Readonly<Record<string, string>> = {
  qwen3_vl: '16-pixel patches and DeepStack features concatenated on the width',
  qwen3_vl_moe: '16-pixel patches and DeepStack features concatenated on the width',
  internvl: '448-pixel tiles with a thumbnail and a pixel shuffle to 256 tokens per tile',
  internvl_chat: '448-pixel tiles with a thumbnail and a pixel shuffle to 256 tokens per tile',
};

/** What this encoder's preprocessing does (docs/encoding.md); a checkpoint must agree. */
const PATCH = 14;
const MERGE = 2;
const TEMPORAL = 2;
const CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073];
const CLIP_STD = [0.26862954, 0.26130258, 0.27577711];
const BICUBIC = 3;

/** What a model directory says, and where each effective value came from. */
export interface ModelDir {
  dir: string;
  /** The directory's base name: the model's name in /health, /metrics and the logs. */
  name: string;
  family: string;
  visionPath: string;
  audioPath?: string;
  /** The embedding width the checkpoint's config declares (checked against the ONNX tower). */
  width: number;
  minPixels: number;
  maxPixels: number;
  patchSize: number;
  mergeSize: number;
  temporalPatchSize: number;
  imageMean: number[];
  imageStd: number[];
}

/** A model directory the encoder cannot serve: the message names the file and the key. */
export class ModelDirError extends Error {
  override readonly name = 'ModelDirError';
}

type Json = Record<string, unknown>;

function readJson(dir: string, file: string): Json {
  const path = join(dir, file);
  if (!existsSync(path)) throw new ModelDirError(`${path} is missing (EPD_MODEL_DIR)`);
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new ModelDirError(`${path} is not JSON: ${(err as Error).message}`, { cause: err });
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ModelDirError(`${path} is not a JSON object`);
  return value as Json;
}

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v > 0;

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
  const family = FAMILIES[modelType];
  if (!family) {
    const why = NOT_YET[modelType];
    throw new ModelDirError(
      `${cfgFile}: model_type "${modelType}" is not a family this encoder serves yet` +
        `${why ? ` (${why})` : ''}; it serves ${Object.keys(FAMILIES).join(', ')}`,
    );
  }
  const vision = cfg.vision_config;
  if (typeof vision !== 'object' || vision === null)
    throw new ModelDirError(`${cfgFile}: vision_config is missing`);
  const v = vision as Json;

  /** One integer that both files may state: it must be there, agree, and be ours. */
  const geometry = (preKey: string, cfgKey: string, ours: number): number => {
    const a = pre[preKey];
    const b = v[cfgKey];
    if (a === undefined && b === undefined)
      throw new ModelDirError(
        `${preFile}: ${preKey} is missing (nor is vision_config.${cfgKey} in ${cfgFile})`,
      );
    if (a !== undefined && !isInt(a))
      throw new ModelDirError(`${preFile}: ${preKey} must be a positive integer`);
    if (b !== undefined && !isInt(b))
      throw new ModelDirError(`${cfgFile}: vision_config.${cfgKey} must be a positive integer`);
    if (a !== undefined && b !== undefined && a !== b)
      throw new ModelDirError(
        `${preFile}: ${preKey}=${a} contradicts ${cfgFile}: vision_config.${cfgKey}=${b}`,
      );
    const value = (a ?? b) as number;
    if (value !== ours)
      throw new ModelDirError(
        `${a !== undefined ? `${preFile}: ${preKey}` : `${cfgFile}: vision_config.${cfgKey}`}=${value}: this encoder's ${family} preprocessing uses ${ours}`,
      );
    return value;
  };
  const patchSize = geometry('patch_size', 'patch_size', PATCH);
  const mergeSize = geometry('merge_size', 'spatial_merge_size', MERGE);
  const temporalPatchSize = geometry('temporal_patch_size', 'temporal_patch_size', TEMPORAL);

  const triple = (key: string, ours: number[]): number[] => {
    const value = pre[key];
    if (value === undefined) throw new ModelDirError(`${preFile}: ${key} is missing`);
    if (!Array.isArray(value) || value.length !== 3 || !value.every((x) => typeof x === 'number'))
      throw new ModelDirError(`${preFile}: ${key} must be three numbers`);
    if (value.some((x, i) => Math.abs(x - ours[i]!) > 1e-6))
      throw new ModelDirError(
        `${preFile}: ${key}=${JSON.stringify(value)}: this encoder normalises with ${JSON.stringify(ours)}`,
      );
    return value;
  };
  const imageMean = triple('image_mean', CLIP_MEAN);
  const imageStd = triple('image_std', CLIP_STD);
  if (pre.resample !== undefined && pre.resample !== BICUBIC)
    throw new ModelDirError(
      `${preFile}: resample=${JSON.stringify(pre.resample)}: this encoder resizes with bicubic (3)`,
    );

  // min/max pixels: the processor's own keys, or `size` as newer transformers write it.
  const size = (typeof pre.size === 'object' && pre.size !== null ? pre.size : {}) as Json;
  const pixels = (key: string, sizeKey: string): number => {
    const a = pre[key];
    const b = size[sizeKey];
    if (a === undefined && b === undefined)
      throw new ModelDirError(`${preFile}: ${key} is missing (nor is size.${sizeKey})`);
    if (a !== undefined && !isInt(a))
      throw new ModelDirError(`${preFile}: ${key} must be a positive integer`);
    if (b !== undefined && !isInt(b))
      throw new ModelDirError(`${preFile}: size.${sizeKey} must be a positive integer`);
    if (a !== undefined && b !== undefined && a !== b)
      throw new ModelDirError(`${preFile}: ${key}=${a} contradicts size.${sizeKey}=${b}`);
    return (a ?? b) as number;
  };
  const minPixels = pixels('min_pixels', 'shortest_edge');
  const maxPixels = pixels('max_pixels', 'longest_edge');
  if (minPixels > maxPixels)
    throw new ModelDirError(`${preFile}: min_pixels=${minPixels} exceeds max_pixels=${maxPixels}`);

  // The merged output's width: Qwen2.5-VL names it out_hidden_size; Qwen2-VL's merger
  // projects to vision_config.hidden_size (the language model's width).
  const widthKey = modelType === 'qwen2_5_vl' ? 'out_hidden_size' : 'hidden_size';
  const width = v[widthKey];
  if (!isInt(width))
    throw new ModelDirError(
      `${cfgFile}: vision_config.${widthKey} is missing (the embedding width)`,
    );

  const visionPath = join(dir, MODEL_DIR_FILES.vision);
  if (!existsSync(visionPath))
    throw new ModelDirError(`${visionPath} is missing (the ONNX vision tower)`);
  const audioPath = join(dir, MODEL_DIR_FILES.audio);
  return {
    dir,
    name: basename(dir),
    family,
    visionPath,
    ...(existsSync(audioPath) ? { audioPath } : {}),
    width,
    minPixels,
    maxPixels,
    patchSize,
    mergeSize,
    temporalPatchSize,
    imageMean,
    imageStd,
  };
}
