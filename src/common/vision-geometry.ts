/**
 * The vision preprocessing's geometry (the Qwen-VL processors' patch layout): one
 * definition for the preprocessing threads, the model contract, the model directory's
 * checks (config/model-dir.ts) and vLLM's grid check, so none of them can drift from the
 * others. A model directory's own files give it (`preprocessor_config.json` and
 * `config.json`); without one, the service's default model is Qwen2-VL-shaped.
 */
export interface VisionGeometry {
  /** Side of one square patch, in pixels (Qwen2-VL, Qwen2.5-VL: 14; Qwen3-VL: 16). */
  readonly patchSize: number;
  /** Patches merged per side into one token (2: a 2×2 merge, 4 patches per token). */
  readonly mergeSize: number;
  /** Frames per patch on the time axis (a still image is its one frame, twice). */
  readonly temporalPatchSize: number;
  /** Per-channel normalisation after the 1/255 rescale. */
  readonly imageMean: readonly [number, number, number];
  readonly imageStd: readonly [number, number, number];
  /**
   * Tiling families (InternVL): the image is cut into square tiles of one size instead of
   * being patchified whole. Absent for the Qwen-VL families.
   */
  readonly tiling?: Tiling;
}

/**
 * InternVL's dynamic tiling (transformers' GotOcr2ImageProcessor with crop_to_patches, as
 * InternVLProcessor runs it): the tile arrangement (columns × rows, between `minTiles` and
 * `maxTiles` tiles) whose aspect ratio is closest to the image's, the image resized to it and
 * cut into `size`-pixel tiles, plus a thumbnail (the whole image at one tile's size) when
 * there is more than one tile. Each tile is one model-input row, channel-major
 * `[3, size, size]`; its tokens are (size / patch)² / merge² (256 for 448 / 14 / 2).
 */
export interface Tiling {
  readonly size: number;
  readonly minTiles: number;
  readonly maxTiles: number;
  readonly thumbnail: boolean;
}

/**
 * A video processor's own bounds (Qwen3-VL's `video_preprocessor_config.json`): the smart
 * resize counts every frame's pixels against them (see videoSmartResize), and the video's
 * normalisation may differ from the image's.
 */
export interface VideoBounds {
  readonly minPixels: number;
  readonly maxPixels: number;
  /** transformers' `cap_pixels_per_frame` (qwen-vl-utils' per-frame cap); off by default. */
  readonly capPixelsPerFrame: boolean;
  readonly imageMean: readonly [number, number, number];
  readonly imageStd: readonly [number, number, number];
}

export const CHANNELS = 3;

/**
 * The temporal patch every family this encoder serves uses (the patch layout writes two
 * frames per patch; a model directory that states another is refused at start).
 */
export const TEMPORAL_PATCH = 2;

/** Qwen2-VL and Qwen2.5-VL: 14-pixel patches, 2×2 merge, OpenAI CLIP normalisation. */
export const QWEN2_VL_GEOMETRY: VisionGeometry = Object.freeze({
  patchSize: 14,
  mergeSize: 2,
  temporalPatchSize: TEMPORAL_PATCH,
  imageMean: [0.48145466, 0.4578275, 0.40821073] as const,
  imageStd: [0.26862954, 0.26130258, 0.27577711] as const,
});

/** Qwen3-VL: 16-pixel patches, 2×2 merge, mean and std 0.5. */
export const QWEN3_VL_GEOMETRY: VisionGeometry = Object.freeze({
  patchSize: 16,
  mergeSize: 2,
  temporalPatchSize: TEMPORAL_PATCH,
  imageMean: [0.5, 0.5, 0.5] as const,
  imageStd: [0.5, 0.5, 0.5] as const,
});

/** The geometry the service serves without a model directory (its generated default model). */
export const DEFAULT_GEOMETRY = QWEN2_VL_GEOMETRY;

/**
 * Values in one packed model-input row: channels × temporal patch × patch² (1176 for 14,
 * 1536 for 16); for a tiling family, one whole tile (channels × size², 602,112 for 448).
 */
export function patchDim(g: VisionGeometry): number {
  if (g.tiling) return CHANNELS * g.tiling.size * g.tiling.size;
  return CHANNELS * g.temporalPatchSize * g.patchSize * g.patchSize;
}

/** The multiple each resized side is rounded to: patch × merge (28 for 14, 32 for 16). */
export function resizeFactor(g: VisionGeometry): number {
  return g.patchSize * g.mergeSize;
}

/** Tokens the language model reserves for a grid (in patches): one per merge² patches. */
export function tokensForGrid(t: number, h: number, w: number, mergeSize: number): number {
  return (t * h * w) / (mergeSize * mergeSize);
}

/**
 * The tile arrangement for an image of `height × width`: transformers'
 * get_optimal_tiled_canvas. Every (columns, rows) with a tile count within the bounds, in
 * order of tile count (columns outer, rows inner within one count); the closest aspect ratio
 * wins, and on a tie the later (more tiles) one, while the image's area exceeds half the
 * arrangement's.
 */
export function tiledCanvas(
  height: number,
  width: number,
  t: Tiling,
): { cols: number; rows: number } {
  const arrangements: [number, number][] = [];
  for (let c = 1; c <= t.maxTiles; c++)
    for (let r = 1; r <= t.maxTiles; r++)
      if (c * r <= t.maxTiles && c * r >= t.minTiles) arrangements.push([c, r]);
  // A stable sort by tile count, as Python's sorted() is.
  arrangements.sort((a, b) => a[0] * a[1] - b[0] * b[1]);
  const aspect = width / height;
  const area = width * height;
  let bestDiff = Infinity;
  let best: [number, number] = [1, 1];
  for (const [c, r] of arrangements) {
    const diff = Math.abs(aspect - c / r);
    if (diff < bestDiff) {
      bestDiff = diff;
      best = [c, r];
    } else if (diff === bestDiff && area > 0.5 * t.size * t.size * c * r) {
      best = [c, r];
    }
  }
  return { cols: best[0], rows: best[1] };
}

/** Tiles an arrangement makes: columns × rows, plus the thumbnail when there is more than one. */
export function tileCount(cols: number, rows: number, t: Tiling): number {
  const n = cols * rows;
  return n + (t.thumbnail && n > 1 ? 1 : 0);
}

/**
 * A tiled image's grid, in patches, so that every grid reads the same way: `[tiles,
 * size / patch, size / patch]`, whose tokens by tokensForGrid are tiles × 256 for InternVL.
 */
export function tileGrid(tiles: number, g: VisionGeometry): [number, number, number] {
  const side = g.tiling!.size / g.patchSize;
  return [tiles, side, side];
}

/** A tiling family's tokens per tile: (size / patch / merge)² (256 for InternVL's 448 / 14 / 2). */
export function tokensPerTile(g: VisionGeometry): number {
  const side = g.tiling!.size / g.patchSize / g.mergeSize;
  return side * side;
}
