import type { Clock } from '../common/clock';
import { destinationViews, type DestinationView } from '../delivery/delivery.service';
import type { ReqPhase, ReqStateStore, StagingStats } from '../requests/req-state.store';
import type { SlabUsage } from '../common/kernel';

export interface RequestView {
  req_id: string;
  modality: string;
  part_idx: number;
  state: ReqPhase;
  bytes: number;
  embedding_len: number | null;
  embedding_dim: number | null;
  dtype: string | null;
  age_ms: number;
  idle_ms: number;
  receive_count: number | null;
  acked: number;
  destinations: DestinationView[];
  /**
   * Where the staged embedding lives: in this process's memory, or also in the object
   * store (taken over from an instance that handed it over; its object goes at release).
   */
  lives: 'memory' | 'memory+object_store';
}

export interface RequestsView {
  staging: StagingStats;
  pending: number;
  /** Preprocessed model inputs waiting here for their forward (parcels held). */
  model_inputs_held: number;
  /** The staging slab (EPD_STAGING_SLAB_BYTES): its size, and the bytes and slots in use (0s without one). */
  staging_slab: SlabUsage;
  requests: RequestView[];
}

/** The requests with state in this process: encoding or staged, with bytes and ages. */
export function requestsView(
  states: ReqStateStore,
  clock: Clock,
  pipeline: { pending: number; modelInputsHeld: number; slab?: SlabUsage },
): RequestsView {
  const now = clock.now();
  return {
    staging: states.stats(),
    pending: pipeline.pending,
    model_inputs_held: pipeline.modelInputsHeld,
    staging_slab: pipeline.slab ?? { capacityBytes: 0, usedBytes: 0, slots: 0 },
    requests: states.list().map((s) => ({
      req_id: s.reqId,
      modality: s.modality,
      part_idx: s.partIdx,
      state: s.phase,
      bytes: s.heldBytes,
      embedding_len: s.embedding?.tokens ?? null,
      embedding_dim: s.embedding?.dim ?? null,
      dtype: s.embedding?.dtype ?? null,
      age_ms: now - s.createdAt,
      idle_ms: now - s.lastUsedAt,
      receive_count: s.receiveCount ?? null,
      acked: s.ackedCount,
      destinations: destinationViews(s),
      lives: s.origin === 'object_store' ? 'memory+object_store' : 'memory',
    })),
  };
}
