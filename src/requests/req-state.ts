import { Errors } from '../common/errors/error-catalogue';
import type {
  Modality,
  ReleaseReason,
  SlabSlot,
  StagingDtype,
  VideoTiming,
} from '../common/kernel';
import { endpointKey, type Endpoint } from '../transfer/embedding-transport';

export interface StagedEmbedding {
  data: Float32Array | Uint16Array;
  tokens: number;
  dim: number;
  dtype: StagingDtype;
  bytes: number;
  /** Per item: `[t, h, w]` for images and video, `[feature_len]` for audio. */
  grid: number[][];
  /** The staging slab slot `data` views, when it is in the slab; the state holds it. */
  slot?: SlabSlot;
  /** Video to Qwen2.5-VL or Qwen3-VL: its timing, sent with it. */
  timing?: VideoTiming;
}

export type DestinationStatus = 'pending' | 'sending' | 'acked' | 'failed';

interface DestinationFields {
  endpoint: Endpoint;
  key: string;
  status: DestinationStatus;
  /** How it became a destination: registered (pushed to) or asked with `send`. */
  source: 'registered' | 'send' | 'encode';
  deliveries: number;
  /** Bytes of the last acked delivery. */
  bytes?: number;
  error?: string;
}

/** One receiver of this request's embedding, keyed by `host:port`; changed only by ReqState. */
export type Destination = Readonly<DestinationFields>;

/**
 * Where a request is: `encoding` until its embedding is staged, `staged` after, and
 * `release-pending` when a release arrived while an encode or a send still runs (it is
 * applied when the last one ends). `released` is terminal: the state has left the store.
 */
export type ReqPhase = 'encoding' | 'staged' | 'release-pending' | 'released';

/**
 * Why a state was freed: every receiver acked (ack), a release call or the admin route
 * (explicit), idle past EPD_SEND_TIMEOUT_MS (ttl), or its encode failed (error).
 */
export type { ReleaseReason };

/** Distinct destinations one request may have when no receive_count bounds it. */
export const MAX_DESTINATIONS = 1024;

/**
 * The lifecycle of one active req_id on this worker (docs/contract.md §6), as a state machine.
 * Its fields are read-only to everyone else; they change only through the named
 * transitions below (begin is the constructor; reserve, stage, release and expire are
 * applied by ReqStateStore, which also keeps the staging budget). A transition the
 * current phase does not allow is a programming error and throws.
 */
export class ReqState {
  private staged = false;
  private releasePending = false;
  private why: ReleaseReason = 'explicit';
  private stagedAtMs?: number;
  private ended = false;
  private encodes = 1;
  private sends = 0;
  private held = 0;
  private staging?: StagedEmbedding;
  private count?: number;
  private used: number;
  private readonly dests = new Map<string, DestinationFields>();
  private readonly destinationListeners = new Set<() => void>();
  /** Encoded here, or taken over from the object store (another instance handed it over). */
  origin: 'encoded' | 'object_store' = 'encoded';
  /** Ended by a handoff to the object store (not a release): calls for it go there now. */
  handedOff = false;
  /** Settles when the embedding is staged (resolves) or the state ends first (rejects). */
  readonly ready: Promise<void>;
  private settleReady!: { resolve(): void; reject(e: Error): void };

  /** begin: an encode of `reqId` starts. */
  constructor(
    readonly reqId: string,
    readonly modality: Modality,
    readonly partIdx: number,
    readonly numParts: number,
    readonly createdAt: number,
  ) {
    this.used = createdAt;
    this.ready = new Promise<void>((resolve, reject) => (this.settleReady = { resolve, reject }));
    this.ready.catch(() => undefined); // nobody may be waiting
  }

  get phase(): ReqPhase {
    if (this.ended) return 'released';
    if (this.releasePending) return 'release-pending';
    return this.staged ? 'staged' : 'encoding';
  }

  /** True once a release was asked for (or applied): no new work may start for it. */
  get releaseRequested(): boolean {
    return this.releasePending || this.ended;
  }

  /** Bytes held against EPD_STAGING_MAX_BYTES: reserved before the forward, then staged. */
  get heldBytes(): number {
    return this.held;
  }

  get embedding(): StagedEmbedding | undefined {
    return this.staging;
  }

  /** Fixed by the first registration, send or encode target that names it. */
  get receiveCount(): number | undefined {
    return this.count;
  }

  /** When the embedding was staged (epoch ms); undefined before. */
  get stagedAt(): number | undefined {
    return this.stagedAtMs;
  }

  /** Why a deferred release was asked for (applied when the last encode or send ends). */
  get releaseReason(): ReleaseReason {
    return this.why;
  }

  get lastUsedAt(): number {
    return this.used;
  }

  get destinations(): ReadonlyMap<string, Destination> {
    return this.dests;
  }

  get ackedCount(): number {
    let n = 0;
    for (const d of this.dests.values()) if (d.status === 'acked') n++;
    return n;
  }

  /** True when receive_count distinct destinations have acked: the request is done. */
  get complete(): boolean {
    return this.count !== undefined && this.ackedCount >= this.count;
  }

  /** An encode or a send runs for it. */
  get busy(): boolean {
    return this.encodes > 0 || this.sends > 0;
  }

  /** Nothing runs for it and it was not used for `ttl` ms: the sweep may expire it. */
  idleFor(now: number, ttl: number): boolean {
    return this.encodes === 0 && this.sends === 0 && now - this.used > ttl;
  }

  /** reserve: hold `bytes` more of the budget (the store checked the budget). */
  reserve(bytes: number): void {
    this.expect(!this.staged && !this.ended, 'reserve');
    this.held += bytes;
  }

  /** stage: the forward's output; returns how many bytes the budget changes by. */
  stage(embedding: StagedEmbedding, now: number): number {
    this.expect(!this.staged && !this.ended, 'stage');
    // The real size replaces the reservation (they match unless the model lied, which the
    // token check already refused).
    const delta = embedding.bytes - this.held;
    this.held = embedding.bytes;
    this.staging = embedding;
    this.staged = true;
    this.stagedAtMs = now;
    this.used = now;
    this.settleReady.resolve();
    return delta;
  }

  /** The encode ends; true when a release deferred behind it is now due. */
  endEncode(): boolean {
    this.encodes = Math.max(0, this.encodes - 1);
    return this.releaseDue();
  }

  /** Fixes receive_count: the first caller that names it wins; a different count is a 400. */
  expectReceivers(count: number): void {
    if (this.count === undefined) this.count = count;
    else if (this.count !== count)
      throw Errors.inconsistentReceiveCount(this.reqId, this.count, count);
  }

  /**
   * addDestination: the receiver at `endpoint` (the existing one if it is already known),
   * bounded by receive_count. Wakes whoever waits for destinations to register.
   */
  addDestination(endpoint: Endpoint, source: Destination['source']): Destination {
    const key = endpointKey(endpoint);
    const existing = this.dests.get(key);
    if (existing) return existing;
    this.expect(!this.releaseRequested, 'addDestination');
    const max = this.count ?? MAX_DESTINATIONS;
    if (this.dests.size >= max) throw Errors.tooManyDestinations(this.reqId, max);
    const dest: DestinationFields = { endpoint, key, status: 'pending', source, deliveries: 0 };
    this.dests.set(key, dest);
    for (const l of [...this.destinationListeners]) l();
    return dest;
  }

  /** Resolves when `count` destinations have registered (at once if they already have). */
  whenDestinations(count: number): Promise<void> {
    if (this.dests.size >= count) return Promise.resolve();
    return new Promise((resolve) => {
      const check = () => {
        if (this.dests.size < count) return;
        this.destinationListeners.delete(check);
        resolve();
      };
      this.destinationListeners.add(check);
    });
  }

  /** A delivery to `dest` starts; it holds the state (no release, no expiry) until ack or fail. */
  startSend(dest: Destination): void {
    this.sends++;
    this.own(dest).status = 'sending';
  }

  /** ack: the receiver at `dest` confirmed `bytes`; true when a deferred release is now due. */
  ack(dest: Destination, bytes: number, now: number): boolean {
    const d = this.own(dest);
    d.deliveries++;
    d.bytes = bytes;
    d.status = 'acked';
    d.error = undefined;
    return this.endSend(now);
  }

  /** The delivery to `dest` failed; the embedding stays, so the receiver may retry. */
  fail(dest: Destination, error: string, now: number): boolean {
    const d = this.own(dest);
    d.status = 'failed';
    d.error = error;
    return this.endSend(now);
  }

  /**
   * release asked for: 'now' when nothing runs for it (the store then ends it), else
   * 'deferred' until the last encode or send ends.
   */
  requestRelease(reason: ReleaseReason): 'now' | 'deferred' {
    if (this.encodes > 0 || this.sends > 0) {
      if (!this.releasePending) this.why = reason;
      this.releasePending = true;
      return 'deferred';
    }
    return 'now';
  }

  /**
   * release or expire, applied: terminal. Returns the bytes it held, for the budget.
   * Whoever waits for the embedding learns it is gone.
   */
  end(): number {
    this.expect(!this.ended, 'end');
    this.ended = true;
    const freed = this.held;
    this.held = 0;
    // Back to the slab once no send still writes from it (each holds it meanwhile).
    this.staging?.slot?.drop();
    this.staging = undefined;
    this.settleReady.reject(new Error(`Encoder request was released: ${this.reqId}`));
    return freed;
  }

  private endSend(now: number): boolean {
    this.sends = Math.max(0, this.sends - 1);
    this.used = now;
    return this.releaseDue();
  }

  private releaseDue(): boolean {
    return this.releasePending && !this.ended && this.encodes === 0 && this.sends === 0;
  }

  private own(dest: Destination): DestinationFields {
    const d = this.dests.get(dest.key);
    if (d !== dest) throw new Error(`destination ${dest.key} is not one of ${this.reqId}'s`);
    return d;
  }

  private expect(allowed: boolean, transition: string): void {
    if (!allowed)
      throw new Error(`ReqState ${this.reqId}: ${transition} not allowed in ${this.phase}`);
  }
}
