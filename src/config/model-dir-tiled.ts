import { existsSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { VideoBounds } from '../common/vision-geometry';
import {
  MAX_MERGE,
  MAX_PATCH,
  MODEL_DIR_FILES,
  ModelDirError,
  isInt,
  normalisation,
  oneInteger,
  readJson,
  type Json,
  type ModelDir,
} from './model-dir-files';

/** A square side stated as one integer or as two equal ones (`[448, 448]`), or undefined. */
function side(value: unknown, at: string): number | undefined {
  if (value === undefined) return undefined;
  const pair = Array.isArray(value) ? value : [value, value];
  if (pair.length !== 2 || !isInt(pair[0]) || pair[0] !== pair[1])
    throw new ModelDirError(`${at} must be one positive integer or two equal ones (square)`);
  return pair[0];
}

/** transformers' GotOcr2ImageProcessor defaults, which a saved processor may leave out. */
const TILING_DEFAULTS = { min_patches: 1, max_patches: 12 } as const;
/** Sanity bound on tiles per image (InternVL checkpoints use 6 to 12; 40 in some configs). */
const MAX_TILES = 64;

/**
 * A tiling family's directory (InternVL as transformers converts it, model_type `internvl`):
 * the tile side from preprocessor_config.json `size` (height = width) and
 * config.json vision_config.image_size, which must agree; the patch from
 * vision_config.patch_size; the pixel-shuffle factor from `downsample_ratio` (0.5: 2×2
 * patches per token, so (448 / 14)² / 4 = 256 tokens per tile, which `image_seq_length`
 * must equal where stated); min/max tiles from `min_patches` / `max_patches` (the
 * processor's defaults 1 and 12 when absent); the width from text_config.hidden_size (the
 * projector's output). InternVLProcessor always crops to tiles (its own default), whatever
 * the image processor's `crop_to_patches` says, and adds the thumbnail.
 */
/**
 * InternVL's video processor (video_preprocessor_config.json): each frame resized to one
 * tile, so its `size` must be the tile's; its own mean and std (the class's defaults are
 * CLIP's and 384, so the file must state them).
 */
function tiledVideo(pre: Json, file: string, tile: number): VideoBounds {
  const size = (typeof pre.size === 'object' && pre.size !== null ? pre.size : {}) as Json;
  if (size.height !== tile || size.width !== tile)
    throw new ModelDirError(
      `${file}: size must be {"height": ${tile}, "width": ${tile}} (one tile a frame), it is ${JSON.stringify(pre.size)}`,
    );
  const { imageMean, imageStd } = normalisation(pre, file);
  const pixels = tile * tile;
  return Object.freeze({
    minPixels: pixels,
    maxPixels: pixels,
    capPixelsPerFrame: false,
    imageMean,
    imageStd,
  });
}

export function readTiledDir(
  dir: string,
  family: string,
  pre: Json,
  cfg: Json,
  preFile: string,
  cfgFile: string,
): ModelDir {
  const v = cfg.vision_config;
  if (typeof v !== 'object' || v === null)
    throw new ModelDirError(`${cfgFile}: vision_config is missing`);
  const vision = v as Json;
  const size = (typeof pre.size === 'object' && pre.size !== null ? pre.size : {}) as Json;
  if (size.height !== size.width)
    throw new ModelDirError(
      `${preFile}: size.height=${String(size.height)} and size.width=${String(size.width)} differ: tiles are square`,
    );
  const tile = oneInteger(
    { at: `${preFile}: size.height`, value: size.height },
    {
      at: `${cfgFile}: vision_config.image_size`,
      named: `${cfgFile}: vision_config.image_size`,
      value: side(vision.image_size, `${cfgFile}: vision_config.image_size`),
    },
    `${preFile}: size.height is missing (nor is vision_config.image_size in ${cfgFile})`,
  ).value;
  const patchSize = side(vision.patch_size, `${cfgFile}: vision_config.patch_size`);
  if (patchSize === undefined)
    throw new ModelDirError(`${cfgFile}: vision_config.patch_size is missing`);
  if (patchSize > MAX_PATCH)
    throw new ModelDirError(
      `${cfgFile}: vision_config.patch_size=${patchSize}: at most ${MAX_PATCH} is supported`,
    );
  const ratio = cfg.downsample_ratio;
  if (ratio === undefined)
    throw new ModelDirError(`${cfgFile}: downsample_ratio is missing (the pixel shuffle's factor)`);
  const mergeSize = typeof ratio === 'number' && ratio > 0 ? Math.round(1 / ratio) : NaN;
  if (
    !Number.isInteger(mergeSize) ||
    Math.abs(mergeSize * (ratio as number) - 1) > 1e-9 ||
    mergeSize > MAX_MERGE
  )
    throw new ModelDirError(
      `${cfgFile}: downsample_ratio=${JSON.stringify(ratio)}: must be 1/n for a whole n of at most ${MAX_MERGE} (0.5: 2×2 patches per token)`,
    );
  if (tile % (patchSize * mergeSize) !== 0)
    throw new ModelDirError(
      `${preFile}: size.height=${tile} is not a multiple of patch_size × 1/downsample_ratio (${patchSize * mergeSize})`,
    );
  const tokensPerTile = (tile / patchSize / mergeSize) ** 2;
  if (cfg.image_seq_length !== undefined && cfg.image_seq_length !== tokensPerTile)
    throw new ModelDirError(
      `${cfgFile}: image_seq_length=${JSON.stringify(cfg.image_seq_length)} contradicts (image_size / patch_size)² × downsample_ratio² = ${tokensPerTile}`,
    );
  const tiles = (key: 'min_patches' | 'max_patches') => {
    const value = pre[key] ?? TILING_DEFAULTS[key];
    if (!isInt(value) || value > MAX_TILES)
      throw new ModelDirError(
        `${preFile}: ${key} must be a positive integer of at most ${MAX_TILES}`,
      );
    return value;
  };
  const minTiles = tiles('min_patches');
  const maxTiles = tiles('max_patches');
  if (minTiles > maxTiles)
    throw new ModelDirError(`${preFile}: min_patches=${minTiles} exceeds max_patches=${maxTiles}`);
  const { imageMean, imageStd } = normalisation(pre, preFile);
  const text = cfg.text_config;
  const width = typeof text === 'object' && text !== null ? (text as Json).hidden_size : undefined;
  if (!isInt(width))
    throw new ModelDirError(
      `${cfgFile}: text_config.hidden_size is ${width === undefined ? 'missing' : 'not a positive integer'} (the projector's output width)`,
    );
  const visionPath = join(dir, MODEL_DIR_FILES.vision);
  if (!existsSync(visionPath))
    throw new ModelDirError(`${visionPath} is missing (the ONNX vision tower)`);
  const videoFile = join(dir, MODEL_DIR_FILES.video);
  const video = existsSync(videoFile)
    ? tiledVideo(readJson(dir, MODEL_DIR_FILES.video), videoFile, tile)
    : undefined;
  // One tile per image at least, at most maxTiles and the thumbnail: the canvas bounds.
  return {
    ...(video ? { video } : {}),
    dir,
    name: basename(dir),
    family,
    visionPath,
    width,
    minPixels: tile * tile * minTiles,
    maxPixels: tile * tile * maxTiles,
    geometry: Object.freeze({
      patchSize,
      mergeSize,
      temporalPatchSize: 1,
      imageMean,
      imageStd,
      // InternVL's processor always tiles and adds the thumbnail (with max_patches > 1).
      tiling: Object.freeze({ size: tile, minTiles, maxTiles, thumbnail: true }),
    }),
  };
}
