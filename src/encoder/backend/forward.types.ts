import type { StagingDtype } from '../../common/kernel';
import type { ModelKind } from '../pipeline/model-contract';
import type { ModelInput } from '../workers/parcel';
import type { SlabSlot } from './staging-slab';

/** Embeddings are staged in the dtype they are sent in. */
export type { StagingDtype } from '../../common/kernel';

export interface ForwardPart {
  /** This request's packed rows (patches or audio frames), or a parcel holding them. */
  data: ModelInput;
  rows: number;
  /** Vision: (t, h, w) per grid entry. */
  grids: [number, number, number][];
  /** Audio: tokens per window (rows = windows). */
  windowTokens: number[];
  /** embedding_len the preprocessor promised for this request. */
  tokens: number;
  /**
   * Byte offset of this request's slot in the staging slab, when it has one: the
   * inference thread writes the staged values there instead of returning a buffer.
   */
  slabOffset?: number;
}

export interface ForwardTask {
  kind: ModelKind;
  /** Vision: which model runs it (a served model's name; absent, the default). */
  model?: string;
  parts: ForwardPart[];
  dtype: StagingDtype;
}

export interface ForwardOutput {
  /** `tokens × dim` values of one request, in the staging dtype (float16 as raw bits). */
  data: Float32Array | Uint16Array;
  tokens: number;
  /** Set by the inference thread: the values are in the part's slab slot (`data` is empty). */
  inSlab?: boolean;
  /**
   * Main thread: the slab slot `data` views, held for whoever gets this output, who must
   * drop it (or hand it to the request's state, which drops it when the request ends).
   */
  slot?: SlabSlot;
}

export interface ForwardResult {
  outputs: ForwardOutput[];
  dim: number;
  forwardMs: number;
}

/**
 * The inference thread's reply: a result, or a failed fused forward with every part's
 * input handed back. The inputs were transferred to that thread, so the main thread holds
 * only detached buffers; the scheduler retries each request alone with these.
 */
export type ForwardReply =
  | ({ ok: true } & ForwardResult)
  | { ok: false; message: string; code?: number; inputs: Float32Array[] };

export interface ModelInfo {
  /** The default vision model's width. */
  visionDim: number;
  /** Every vision model's width and file, by name (the default's included). */
  visionModels: Record<string, { dim: number; path: string }>;
  /** 0 when no audio model is loaded. */
  audioDim: number;
  /** Mel bins the audio model takes (its input_features' axis 1). */
  audioMels: number;
  visionPath: string;
  audioPath: string;
}

export interface InferenceWorkerData {
  visionPath: string;
  /** Absent: no audio model (EPD_AUDIO_MODEL_PATH=none, or a model directory without one). */
  audioPath?: string;
  intraOpThreads: number;
  /**
   * Every vision model, the default (visionPath) first: its name, file, the values per
   * packed patch row it takes (patchDim of its geometry), and the width its directory's
   * config.json declares (with that file), checked when it loads.
   */
  visionModels: {
    name: string;
    path: string;
    patchDim: number;
    /** A tiling family's tile side (input [tiles, 3, tile, tile]); absent for patch rows. */
    tile?: number;
    /** A tiling family's tokens per tile (output [tiles, tokensPerTile, dim]). */
    tokensPerTile?: number;
    expected?: { width: number; from: string };
  }[];
  /** ONNX Runtime's execution providers, in order (EPD_ORT_EXECUTION_PROVIDERS). */
  executionProviders: string[];
  /** The staging slab (EPD_STAGING_SLAB_BYTES), shared with the main thread. */
  slab?: SharedArrayBuffer;
}
