/**
 * The shared kernel: the few types every feature speaks (docs/architecture.md). They
 * live here, not in the feature that happens to produce them, so that request state,
 * delivery, dispatch and the transfer engines depend on no feature's internals.
 */

/** What an encode request carries (docs/contract.md §2). */
export const MODALITIES = ['image', 'video', 'audio'] as const;
export type Modality = (typeof MODALITIES)[number];

/** The dtype embeddings are staged and sent in (EPD_STAGING_DTYPE; float16/bfloat16 as raw bits). */
export type StagingDtype = 'float32' | 'float16' | 'bfloat16';

/**
 * A video's timing, as the language side's position code wants it beside the embedding
 * (SGLang's EmbeddingData "video meta" attributes, one list entry per video): Qwen2.5-VL's
 * `second_per_grid_ts` (seconds per temporal grid step), Qwen3-VL's `video_timestamps`
 * (seconds, one per temporal patch). Computed by encoder/video-timing.ts.
 */
/** How a wait_metadata ended. */
export type WaitOutcome = 'ok' | 'timeout' | 'error' | 'cancelled';

/** Why a request's state ended: acked by its receivers, released by a call, expired, failed. */
export type ReleaseReason = 'ack' | 'explicit' | 'ttl' | 'error';

export interface VideoTiming {
  second_per_grid_ts?: number[];
  video_timestamps?: number[][];
}

/** A receiver's address: where a frame is pushed. */
export interface Endpoint {
  host: string;
  port: number;
}

/** A staging slab's size and use (epd_encoder_staging_slab_bytes, and GET /admin/requests). */
export interface SlabUsage {
  capacityBytes: number;
  usedBytes: number;
  slots: number;
}

/**
 * One staged embedding's place in the staging slab, as its holders see it: the request's
 * state holds it once staged, and each socket write from it holds it until the write is
 * done with the memory (encoder/backend/staging-slab.ts has the slab itself).
 */
export interface SlabSlot {
  readonly freed: boolean;
  hold(): void;
  drop(): void;
}
