import type { MessagePort } from 'node:worker_threads';
import type { ForwardPart } from '../backend/forward.types';
import type { ModelInput } from '../workers/parcel';
import type { Modality } from '../../common/kernel';
import type { VideoBounds, VisionGeometry } from '../../common/vision-geometry';
import type { ModelKind } from '../pipeline/model-contract';

export interface PreprocessTask {
  modality: Modality;
  items: Uint8Array[];
  /** Images and video: the model's patch geometry (its model directory's, or the default). */
  geometry: VisionGeometry;
  minPixels: number;
  maxPixels: number;
  /** Video, Qwen3-VL: the video processor's own bounds and normalisation. */
  video?: VideoBounds;
  maxVideoFrames: number;
  /** No single decoded image or frame may be larger (sharp's limitInputPixels). */
  maxDecodedPixels: number;
  /** Audio: mel bins of the audio model's input_features. */
  nMels: number;
  /**
   * Images: each item's smart-resized size (height, width), as the plan read it from the
   * same bytes' headers. Given (one per item), the preprocessing does not read them again:
   * sharp's metadata costs ~0.35 core-ms an image, ~7% of a 448² encode's overhead.
   * The decode still enforces maxDecodedPixels.
   */
  sizes?: [number, number][];
  /**
   * Where to ship the model input (see Parcel): given, the values go there and the
   * reply's `data` is empty, so they never enter the main thread's heap. Absent
   * (in-process callers), the reply carries the values.
   */
  parcel?: MessagePort;
}

/**
 * What a request will cost, read from the media headers before anything is decoded: the
 * caps (EPD_MAX_TOKENS_PER_REQUEST, EPD_MAX_DECODED_PIXELS, EPD_MAX_AUDIO_SECONDS) and the
 * staging reservation are checked against it first.
 */
export interface MediaPlan {
  ok: true;
  /** Exactly the tokens the preprocessing will produce. */
  tokens: number;
  /** Per item for images and audio clips; one entry for a whole video. */
  itemTokens: number[];
  /** Images: each item's smart-resized size (height, width); empty otherwise. */
  itemSizes: [number, number][];
  /** Source pixels decoded, over every image and kept video frame. */
  decodedPixels: number;
  /** Video: frames in the source, and frames kept after sampling to EPD_MAX_VIDEO_FRAMES. */
  sourceFrames: number;
  keptFrames: number;
  audioSeconds: number;
  /** Audio: float32 bytes the decoder produces (native rate, every channel). */
  decodedAudioBytes: number;
  /** Bytes of the model input the preprocessing will produce (float32 patches or mels). */
  inputBytes: number;
}

export type PlanResult = MediaPlan | PreprocessFailed;

/**
 * `D`: how the model input travels. The worker produces the values (an empty array once
 * they were shipped in a parcel); the main thread's Preprocessor hands out a ModelInput.
 */
export interface PreprocessOk<D extends ModelInput = ModelInput> {
  ok: true;
  kind: ModelKind;
  /** Packed model input: patches (patchDim-wide rows) or audio windows (n_mels × 3000 each). */
  data: D;
  rows: number;
  /** Vision only: (t, h, w) per image or video, in patches. */
  grids: [number, number, number][];
  /** Audio only: valid mel frames per 30 s window (SGLang's `audio_feature_lens`). */
  featureLens: number[];
  /** Audio only: tokens per window (of the tower's 750 rows, the real ones). */
  windowTokens: number[];
  /** Tokens the language model must reserve: embedding_len. */
  tokens: number;
  ms: number;
}

export interface PreprocessFailed {
  ok: false;
  /** `load`: the bytes are not decodable media (400 "Error while loading data");
   *  `process`: decodable but not processable (400 "Failed to process mm items"). */
  stage: 'load' | 'process';
  itemIndex: number;
  message: string;
}

export type PreprocessResult<D extends ModelInput = ModelInput> =
  PreprocessOk<D> | PreprocessFailed;

/**
 * Per item, what a receiver needs to place the embedding: `[t, h, w]` (in patches) for
 * images and video, `[feature_len]` for audio. Carried in the frame header (`grid_thw`)
 * and, on the SGLang wire, as `EmbeddingData.grid_dim`.
 */
export function itemGrids(pre: PreprocessOk): number[][] {
  return pre.kind === 'vision' ? pre.grids : pre.featureLens.map((n) => [n]);
}

/** What the scheduler hands the backend for one preprocessed request. */
export function forwardPart(pre: PreprocessOk): ForwardPart {
  return {
    data: pre.data,
    rows: pre.rows,
    grids: pre.grids,
    windowTokens: pre.windowTokens,
    tokens: pre.tokens,
  };
}
