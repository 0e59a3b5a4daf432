/**
 * The encoder model contract (docs/contract.md §4): the Qwen-VL packed-patch layout for
 * vision (rows of patchDim(geometry) values, in merge order; the geometry is the model's:
 * common/vision-geometry.ts), Whisper log-mel windows for audio (Qwen2-Audio's tower).
 * Preprocessing produces these shapes, the inference worker feeds them, and any model in
 * EPD_MODEL_PATH / EPD_AUDIO_MODEL_PATH / EPD_MODEL_DIR must accept them (checked at start-up).
 */
/**
 * Audio: 16 kHz mono in 30 s windows, each `input_features` float32 [n_mels, 3000]
 * (n_mels from the model: 128 for Qwen2-Audio). The tower emits 750 rows per window, of
 * which the first `((F − 1) // 2 + 1 − 2) // 2 + 1` are real for F valid mel frames.
 */
export const AUDIO_SAMPLE_RATE = 16_000;
export const AUDIO_MEL_FRAMES = 3000;
export const AUDIO_TOKENS_PER_WINDOW = 750;
/** n_mels when the model does not declare it. */
export const DEFAULT_N_MELS = 128;

/** Which model a request needs: `vision` (image, video) or `audio`. */
export type ModelKind = 'vision' | 'audio';
