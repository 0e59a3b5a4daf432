import { z } from 'zod';
import { destinationViewSchema } from '../delivery/delivery.schema';

const ms = z.number().nonnegative();

/** Per-stage timings of one encode, in every reply and in the `epd_encoder_*_seconds` histograms. */
export const stageTimingsSchema = z.object({
  queue_ms: ms,
  load_ms: ms,
  /** Reading the media headers (and waiting for a worker to do it): caps and reservation. */
  plan_ms: ms,
  /** Waiting for room in the working-memory budget (EPD_WORK_MAX_BYTES). */
  memory_wait_ms: ms,
  /** Waiting for a free preprocessing thread. */
  preprocess_wait_ms: ms,
  preprocess_ms: ms,
  forward_ms: ms,
  stage_ms: ms,
  total_ms: ms,
  /** Requests in the fused forward; 0 when no forward ran (every unit from the cache). */
  batch_size: z.number().int().nonnegative(),
  /**
   * With the cache on: units served from it; units joined from another request's encode;
   * of those, units whose encode ran in another process (fetched from its owner).
   */
  cache_hits: z.number().int().nonnegative().optional(),
  cache_joins: z.number().int().nonnegative().optional(),
  cache_remote_joins: z.number().int().nonnegative().optional(),
});

/** The `encode` reply (docs/contract.md §1), documented in /docs from this schema. */
export const encodeResponseSchema = z.object({
  req_id: z.string(),
  part_idx: z.number().int().nonnegative(),
  embedding_size: z.number().int().nonnegative(),
  embedding_len: z.number().int().nonnegative(),
  embedding_dim: z.number().int().positive(),
  timings: stageTimingsSchema,
  /** Present when the embedding was pushed: to `prefill_host:embedding_port`, or to registered destinations. */
  destinations: z.array(destinationViewSchema).optional(),
});

export type StageTimings = z.output<typeof stageTimingsSchema>;
export type EncodeResponse = z.output<typeof encodeResponseSchema>;
