import type { DestinationView } from '../../delivery/delivery.service';

/** Per-stage timings of one encode, in every reply and in `epd_encoder_stage_seconds`. */
export interface StageTimings {
  queue_ms: number;
  load_ms: number;
  /** Reading the media headers (and waiting for a worker to do it): caps and reservation. */
  plan_ms: number;
  /** Waiting for a free preprocessing thread. */
  preprocess_wait_ms: number;
  preprocess_ms: number;
  forward_ms: number;
  stage_ms: number;
  total_ms: number;
  batch_size: number;
}

export interface EncodeResponse {
  req_id: string;
  part_idx: number;
  embedding_size: number;
  embedding_len: number;
  embedding_dim: number;
  timings: StageTimings;
  /** Present when the embedding was pushed: to `prefill_host:embedding_port`, or to registered destinations. */
  destinations?: DestinationView[];
}
