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

/** Values in one packed patch row: channels × temporal patch × patch² (1176 for 14, 1536 for 16). */
export function patchDim(g: VisionGeometry): number {
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
