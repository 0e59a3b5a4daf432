/**
 * The vision preprocessing this encoder does (Qwen2-VL's processor): one definition for
 * the preprocessing threads, the model contract, the model directory's checks
 * (config/model-dir.ts) and vLLM's grid check, so none of them can drift from the others.
 */
export const PATCH_SIZE = 14;
export const TEMPORAL_PATCH = 2;
export const MERGE = 2;

/** OpenAI CLIP normalisation, as Qwen2-VL's image processor uses. */
export const IMAGE_MEAN = [0.48145466, 0.4578275, 0.40821073] as const;
export const IMAGE_STD = [0.26862954, 0.26130258, 0.27577711] as const;

/** Tokens the language model reserves for a grid: one per 2×2 merge of patches. */
export function tokensForGrid(t: number, h: number, w: number): number {
  return (t * h * w) / (MERGE * MERGE);
}
