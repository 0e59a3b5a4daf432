/**
 * The encoder model contract (DESIGN.md §6): Qwen2-VL's packed-patch layout for vision,
 * 16 kHz audio frames for audio. Preprocessing produces these shapes, the inference
 * worker feeds them, and any model in EPD_MODEL_PATH must accept them.
 */
export const PATCH_SIZE = 14;
export const TEMPORAL_PATCH = 2;
export const MERGE = 2;
export const CHANNELS = 3;
/** One packed patch row: channels × temporal patch × 14 × 14 = 1176 values. */
export const PATCH_DIM = CHANNELS * TEMPORAL_PATCH * PATCH_SIZE * PATCH_SIZE;
/** Audio: 40 ms frames of 16 kHz mono. */
export const AUDIO_SAMPLE_RATE = 16_000;
export const AUDIO_FRAME = 640;

/** Which model a request needs: `vision` (image, video) or `audio`. */
export type ModelKind = 'vision' | 'audio';
