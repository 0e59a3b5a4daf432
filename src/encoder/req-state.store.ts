import { Injectable } from '@nestjs/common';
import { Clock } from '../common/clock';
import { Errors } from '../common/errors/error-catalogue';
import { AppConfig } from '../config/app-config';
import type { StagingDtype } from './backend/forward.types';
import type { Modality } from './encode-request.schema';

export interface StagedEmbedding {
  data: Float32Array | Uint16Array;
  tokens: number;
  dim: number;
  dtype: StagingDtype;
  bytes: number;
}

/** Lifecycle state of one active req_id on this worker (DESIGN.md §8). */
export class ReqState {
  activeEncodes = 0;
  releaseRequested = false;
  /** Bytes held against EPD_STAGING_MAX_BYTES: reserved before the forward, then staged. */
  heldBytes = 0;
  embedding?: StagedEmbedding;
  lastUsedAt: number;

  constructor(
    readonly reqId: string,
    readonly modality: Modality,
    readonly partIdx: number,
    readonly numParts: number,
    readonly createdAt: number,
  ) {
    this.lastUsedAt = createdAt;
  }
}

/** Tombstones are tiny, but a flood of releases for unknown ids must not grow memory without bound. */
const MAX_TOMBSTONES = 100_000;

export type ReleaseOutcome = 'released' | 'deferred' | 'tombstoned' | 'already-tombstoned';

export interface StagingStats {
  states: number;
  staged: number;
  usedBytes: number;
  maxBytes: number;
  tombstones: number;
}

/**
 * Active requests and their staged embeddings, with one idempotent release path. Every
 * byte is counted against EPD_STAGING_MAX_BYTES from the moment its size is known (before
 * the forward), so memory use can never exceed the budget. States and tombstones expire
 * after EPD_SEND_TIMEOUT_MS.
 */
@Injectable()
export class ReqStateStore {
  private readonly states = new Map<string, ReqState>();
  /** Releases that arrived before their encode: req_id → expiry (epoch ms). */
  private readonly tombstones = new Map<string, number>();
  private usedBytes = 0;

  constructor(
    private readonly config: AppConfig,
    private readonly clock: Clock,
  ) {}

  /** Starts an encode. 409 while the req_id is active; 409 if it was released before it began. */
  begin(reqId: string, modality: Modality, partIdx: number, numParts: number): ReqState {
    if (this.states.has(reqId)) throw Errors.duplicateActive(reqId);
    if (this.tombstones.delete(reqId)) throw Errors.releasedBeforeEncode(reqId);
    const state = new ReqState(reqId, modality, partIdx, numParts, this.clock.now());
    state.activeEncodes = 1;
    this.states.set(reqId, state);
    return state;
  }

  get(reqId: string): ReqState | undefined {
    return this.states.get(reqId);
  }

  /** Holds `bytes` of the staging budget for this state, or fails with 507. */
  reserve(state: ReqState, bytes: number): void {
    const max = this.config.encoder.stagingMaxBytes;
    if (this.usedBytes + bytes > max) {
      throw Errors.stagingFull(bytes, Math.max(0, max - this.usedBytes), max, state.reqId);
    }
    this.usedBytes += bytes;
    state.heldBytes += bytes;
  }

  stage(state: ReqState, embedding: StagedEmbedding): void {
    // The forward's real size replaces the reservation (they match unless the model lied,
    // which the token check already refused).
    this.usedBytes += embedding.bytes - state.heldBytes;
    state.heldBytes = embedding.bytes;
    state.embedding = embedding;
    state.lastUsedAt = this.clock.now();
  }

  /** Ends the encode; applies a release that was requested while it ran. */
  finishEncode(state: ReqState): void {
    state.activeEncodes = Math.max(0, state.activeEncodes - 1);
    if (state.releaseRequested && state.activeEncodes === 0) this.drop(state);
  }

  /**
   * The one release path, idempotent. While an encode is active the release is deferred
   * (the scheduler skips the work if it has not run yet); for an unknown req_id a
   * tombstone makes a later encode of it fail fast instead of staging what nobody wants.
   */
  release(reqId: string): ReleaseOutcome {
    const state = this.states.get(reqId);
    if (!state) {
      if (this.tombstones.has(reqId)) return 'already-tombstoned';
      if (this.tombstones.size >= MAX_TOMBSTONES) {
        this.tombstones.delete(this.tombstones.keys().next().value!);
      }
      this.tombstones.set(reqId, this.clock.now() + this.config.timeouts.sendTimeoutMs);
      return 'tombstoned';
    }
    if (state.activeEncodes > 0) {
      state.releaseRequested = true;
      return 'deferred';
    }
    this.drop(state);
    return 'released';
  }

  /** Frees a state at once (failed encodes, TTL). */
  drop(state: ReqState): void {
    if (this.states.get(state.reqId) !== state) return;
    this.states.delete(state.reqId);
    this.usedBytes -= state.heldBytes;
    state.heldBytes = 0;
    state.embedding = undefined;
  }

  /** Releases states idle for longer than EPD_SEND_TIMEOUT_MS and drops expired tombstones. */
  sweep(): string[] {
    const now = this.clock.now();
    const ttl = this.config.timeouts.sendTimeoutMs;
    const expired: string[] = [];
    for (const state of this.states.values()) {
      if (state.activeEncodes === 0 && now - state.lastUsedAt > ttl) {
        this.drop(state);
        expired.push(state.reqId);
      }
    }
    for (const [reqId, until] of this.tombstones) if (until <= now) this.tombstones.delete(reqId);
    return expired;
  }

  list(): ReqState[] {
    return [...this.states.values()];
  }

  stats(): StagingStats {
    let staged = 0;
    for (const s of this.states.values()) if (s.embedding) staged++;
    return {
      states: this.states.size,
      staged,
      usedBytes: this.usedBytes,
      maxBytes: this.config.encoder.stagingMaxBytes,
      tombstones: this.tombstones.size,
    };
  }
}
