import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { VideoBounds, VisionGeometry } from '../common/vision-geometry';

/**
 * What every family's reader of a model directory shares: its file names, the result, the
 * start-stopping error, and the checks of one stated value (each names its file and key).
 */
/** A model directory's files (EPD_MODEL_DIR). */
export const MODEL_DIR_FILES = {
  vision: 'vision-encoder.onnx',
  audio: 'audio-encoder.onnx',
  preprocessor: 'preprocessor_config.json',
  config: 'config.json',
  video: 'video_preprocessor_config.json',
} as const;

export type Json = Record<string, unknown>;
/** Sanity bounds on what a file may state (the ONNX tower's input width is checked at load too). */
export const MAX_PATCH = 64;
export const MAX_MERGE = 8;

/** PIL's BICUBIC, the resample this encoder's preprocessing does; a checkpoint must agree. */
export const BICUBIC = 3;

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
  /** Patch, merge and temporal patch sizes, mean and std: what the preprocessing does. */
  geometry: VisionGeometry;
  /** Qwen3-VL: the video processor's own bounds (video_preprocessor_config.json), when present. */
  video?: VideoBounds;
}

/** A model directory the encoder cannot serve: the message names the file and the key. */
export class ModelDirError extends Error {
  override readonly name = 'ModelDirError';
}

export function readJson(dir: string, file: string): Json {
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

export const isInt = (v: unknown): v is number =>
  typeof v === 'number' && Number.isInteger(v) && v > 0;

/** Where a value may be stated (`at`: file and key; `named`: how a contradiction names it). */
export interface Stated {
  at: string;
  named?: string;
  value: unknown;
}

/**
 * One positive integer that may be stated in two places: at least one must state it, each
 * that does must give a positive integer, and the two must agree. The value, and where it
 * was read (the first place that states it).
 */
export function oneInteger(
  first: Stated,
  second: Stated,
  missing: string,
): { value: number; at: string } {
  const stated = [first, second].filter((s) => s.value !== undefined);
  if (stated.length === 0) throw new ModelDirError(missing);
  for (const s of stated)
    if (!isInt(s.value)) throw new ModelDirError(`${s.at} must be a positive integer`);
  if (stated.length === 2 && first.value !== second.value)
    throw new ModelDirError(
      `${first.at}=${String(first.value)} contradicts ${second.named ?? second.at}=${String(second.value)}`,
    );
  return { value: stated[0]!.value as number, at: stated[0]!.at };
}

/** Three numbers of the preprocessor's (std: each above zero). */
function triple(
  pre: Json,
  preFile: string,
  key: string,
  positive: boolean,
): [number, number, number] {
  const value = pre[key];
  if (value === undefined) throw new ModelDirError(`${preFile}: ${key} is missing`);
  if (
    !Array.isArray(value) ||
    value.length !== 3 ||
    !value.every((x) => typeof x === 'number' && Number.isFinite(x) && (!positive || x > 0))
  )
    throw new ModelDirError(
      `${preFile}: ${key} must be three ${positive ? 'positive ' : ''}numbers`,
    );
  return value as [number, number, number];
}

/** Mean and std, and a resample this encoder does (bicubic), from preprocessor_config.json. */
export function normalisation(pre: Json, preFile: string) {
  const imageMean = triple(pre, preFile, 'image_mean', false);
  const imageStd = triple(pre, preFile, 'image_std', true);
  if (pre.resample !== undefined && pre.resample !== BICUBIC)
    throw new ModelDirError(
      `${preFile}: resample=${JSON.stringify(pre.resample)}: this encoder resizes with bicubic (3)`,
    );
  return { imageMean, imageStd };
}

/**
 * min/max pixels, stated as the processor's own keys (`min_pixels` / `max_pixels`) or as
 * `size` (`shortest_edge` / `longest_edge`, as newer transformers write them): at least one
 * of each pair, and both agree where both are there. `first`: the form the messages name
 * first (the image processor's own keys; the video processor's `size`).
 */
export function pixelBounds(
  pre: Json,
  file: string,
  first: 'keys' | 'size',
): { minPixels: number; maxPixels: number } {
  const size = (typeof pre.size === 'object' && pre.size !== null ? pre.size : {}) as Json;
  const read = (key: string, sizeKey: string) => {
    const own: Stated = { at: `${file}: ${key}`, named: key, value: pre[key] };
    const sized: Stated = {
      at: `${file}: size.${sizeKey}`,
      named: `size.${sizeKey}`,
      value: size[sizeKey],
    };
    const [a, b] = first === 'keys' ? [own, sized] : [sized, own];
    return oneInteger(a, b, `${a.at} is missing (nor is ${b.named})`);
  };
  const min = read('min_pixels', 'shortest_edge');
  const max = read('max_pixels', 'longest_edge');
  const [lo, hi] =
    first === 'keys' ? ['min_pixels', 'max_pixels'] : ['size.shortest_edge', 'size.longest_edge'];
  if (min.value > max.value)
    throw new ModelDirError(`${file}: ${lo}=${min.value} exceeds ${hi}=${max.value}`);
  return { minPixels: min.value, maxPixels: max.value };
}
