import { LocalReqIds } from '../routing/owner-routed';
import { Injectable, Logger, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { Clock } from '../common/clock';
import { Errors } from '../common/errors/error-catalogue';
import { AppConfig } from '../config/app-config';
import type { Modality } from '../common/kernel';
import type { Endpoint } from '../transfer/embedding-transport';
import { ReqState, type Destination, type ReleaseReason, type StagedEmbedding } from './req-state';
import { LifecycleEvents } from '../common/lifecycle-events';

export { ReqState } from './req-state';
export type { Destination, ReqPhase, StagedEmbedding } from './req-state';

/** Tombstones are tiny, but a flood of releases for unknown ids must not grow memory without bound. */
const MAX_TOMBSTONES = 100_000;
/** Ids released recently, so a late registration is told "not active" at once. */
const MAX_RECENTLY_RELEASED = 100_000;

/** Failed encodes remembered for late registrations; their messages are cut to this. */
const MAX_RECENT_FAILURES = 10_000;
const MAX_FAILURE_MESSAGE = 1024;

/** A failed encode, kept so a receiver registering after it still hears its error frame. */
export interface RecentFailure {
  modality: Modality;
  partIdx: number;
  numParts: number;
  message: string;
  code: number;
  until: number;
}

/** What boundedSet keeps: a bare expiry (epoch ms), or a record that carries one. */
type Expiring = number | { until: number };
const untilOf = (v: Expiring): number => (typeof v === 'number' ? v : v.until);

/** Sets key → value (constant TTL), oldest evicted at `max`; re-inserting keeps expiry order. */
function boundedSet<V extends Expiring>(
  map: Map<string, V>,
  key: string,
  value: V,
  max: number,
): void {
  map.delete(key);
  if (map.size >= max) map.delete(map.keys().next().value!);
  map.set(key, value);
}

/** Drops entries expired by `now` from a map that boundedSet keeps in expiry order. */
function expireOrdered(map: Map<string, Expiring>, now: number): void {
  for (const [key, value] of map) {
    if (untilOf(value) > now) break;
    map.delete(key);
  }
}

export type ReleaseOutcome = 'released' | 'deferred' | 'tombstoned' | 'already-tombstoned';

export interface StagingStats {
  states: number;
  staged: number;
  usedBytes: number;
  maxBytes: number;
  tombstones: number;
  recentlyReleased: number;
  recentFailures: number;
  startWaiters: number;
}

/**
 * Active requests and their staged embeddings, with one idempotent release path. Every
 * byte is counted against EPD_STAGING_MAX_BYTES from the moment its size is known (before
 * the forward), so memory use can never exceed the budget. States and tombstones expire
 * after EPD_SEND_TIMEOUT_MS.
 */
@Injectable()
export class ReqStateStore implements OnModuleInit, OnModuleDestroy, LocalReqIds {
  private readonly logger = new Logger('Requests');
  private sweepTimer?: NodeJS.Timeout;
  private readonly states = new Map<string, ReqState>();
  /** Releases that arrived before their encode: req_id → expiry (epoch ms). */
  private readonly tombstones = new Map<string, number>();
  /** States released (or expired) recently: req_id → expiry (epoch ms). */
  private readonly recentlyReleased = new Map<string, number>();
  /** Encodes that failed recently, in expiry order (EPD_SEND_TIMEOUT_MS). */
  private readonly failures = new Map<string, RecentFailure>();
  /** Registrations waiting for an encode to start: req_id → resolvers. */
  private readonly startWaiters = new Map<string, Set<(s: ReqState) => void>>();
  private usedBytes = 0;
  /** States freed, by reason (epd_encoder_releases_total). */
  readonly releases: Record<ReleaseReason, number> = { ack: 0, explicit: 0, ttl: 0, error: 0 };
  constructor(
    private readonly config: AppConfig,
    private readonly clock: Clock,
    /** Told `request.ended` and `release.deferred-applied`. */
    private readonly events: LifecycleEvents,
  ) {}

  onModuleInit(): void {
    this.sweepTimer = setInterval(() => {
      const expired = this.sweep();
      if (expired.length > 0) {
        this.logger.log(
          { count: expired.length },
          'released staged embeddings past EPD_SEND_TIMEOUT_MS',
        );
      }
    }, this.config.registry.sweepIntervalMs);
    this.sweepTimer.unref();
  }

  onModuleDestroy(): void {
    clearInterval(this.sweepTimer);
  }

  /** Starts an encode. 409 while the req_id is active; 409 if it was released before it began. */
  begin(reqId: string, modality: Modality, partIdx: number, numParts: number): ReqState {
    if (this.states.has(reqId)) throw Errors.duplicateActive(reqId);
    if (this.tombstones.delete(reqId)) throw Errors.releasedBeforeEncode(reqId);
    const state = new ReqState(reqId, modality, partIdx, numParts, this.clock.now());
    this.states.set(reqId, state);
    this.recentlyReleased.delete(reqId);
    this.failures.delete(reqId);
    const waiters = this.startWaiters.get(reqId);
    if (waiters) {
      this.startWaiters.delete(reqId);
      for (const w of waiters) w(state);
    }
    return state;
  }

  /** Consumes the tombstone of a req_id released before its encode began (DP dispatch). */
  takeTombstone(reqId: string): boolean {
    return this.tombstones.delete(reqId);
  }

  isTombstoned(reqId: string): boolean {
    return this.tombstones.has(reqId);
  }

  /**
   * Remembers a failed encode's error for EPD_SEND_TIMEOUT_MS (at most 10,000, oldest out),
   * so a receiver that registers after the failure is sent the error frame and answered
   * 200, as SGLang's encoder answers, instead of a "not active" that would hide the error.
   */
  rememberFailure(state: ReqState, error: { message: string; code: number }): void {
    boundedSet(
      this.failures,
      state.reqId,
      {
        modality: state.modality,
        partIdx: state.partIdx,
        numParts: state.numParts,
        message: error.message.slice(0, MAX_FAILURE_MESSAGE),
        code: error.code,
        until: this.clock.now() + this.config.timeouts.sendTimeoutMs,
      },
      MAX_RECENT_FAILURES,
    );
  }

  /** The failure of a recently failed encode of `reqId`, if it is still remembered. */
  failureOf(reqId: string): RecentFailure | undefined {
    const failure = this.failures.get(reqId);
    return failure && failure.until > this.clock.now() ? failure : undefined;
  }

  /** True when the req_id was released (or tombstoned) recently: registrations for it are refused. */
  wasReleased(reqId: string): boolean {
    return this.tombstones.has(reqId) || this.recentlyReleased.has(reqId);
  }

  /**
   * Whether calls for `reqId` are this instance's to answer: it holds the req_id's state,
   * or released it recently (so a late `send` is told so at once, as on one instance).
   */
  answersFor(reqId: string): boolean {
    return this.states.has(reqId) || this.wasReleased(reqId);
  }

  /** Waits (up to `deadline`) for an encode of `reqId` to start; undefined on timeout. */
  waitForStart(reqId: string, deadline: number): Promise<ReqState | undefined> {
    const existing = this.states.get(reqId);
    if (existing) return Promise.resolve(existing);
    return new Promise((resolve) => {
      const set = this.startWaiters.get(reqId) ?? new Set();
      this.startWaiters.set(reqId, set);
      const done = (s: ReqState | undefined) => {
        clearTimeout(timer);
        set.delete(done);
        if (set.size === 0 && this.startWaiters.get(reqId) === set) this.startWaiters.delete(reqId);
        resolve(s);
      };
      const timer = setTimeout(() => done(undefined), Math.max(0, deadline - this.clock.now()));
      set.add(done);
    });
  }

  get startWaiterCount(): number {
    let n = 0;
    for (const s of this.startWaiters.values()) n += s.size;
    return n;
  }

  get(reqId: string): ReqState | undefined {
    return this.states.get(reqId);
  }

  /** reserve: holds `bytes` of the staging budget for this state, or fails with 507. */
  reserve(state: ReqState, bytes: number): void {
    const max = this.config.encoder.stagingMaxBytes;
    if (this.usedBytes + bytes > max) {
      throw Errors.stagingFull(bytes, Math.max(0, max - this.usedBytes), max, state.reqId);
    }
    state.reserve(bytes);
    this.usedBytes += bytes;
  }

  /** stage: the embedding is ready; its real size replaces the reservation in the budget. */
  stage(state: ReqState, embedding: StagedEmbedding): void {
    this.usedBytes += state.stage(embedding, this.clock.now());
  }

  /** The encode ends; applies a release that was requested while it ran. */
  finishEncode(state: ReqState): void {
    if (state.endEncode()) this.applyDeferred(state);
  }

  /** ack: `dest` confirmed the delivery; applies a release that was requested while it ran. */
  ack(state: ReqState, dest: Destination, bytes: number): void {
    if (state.ack(dest, bytes, this.clock.now())) this.applyDeferred(state);
  }

  /** The delivery to `dest` failed; applies a release that was requested while it ran. */
  fail(state: ReqState, dest: Destination, error: string): void {
    if (state.fail(dest, error, this.clock.now())) this.applyDeferred(state);
  }

  /**
   * A staged embedding another instance handed to the cluster (the object store tier),
   * staged here as if encoded here: its receive_count, and the destinations that already
   * acked (counted, not sent again). 507 when the staging budget cannot hold it.
   */
  adopt(
    reqId: string,
    modality: Modality,
    partIdx: number,
    numParts: number,
    embedding: StagedEmbedding,
    receiveCount: number | undefined,
    acked: readonly Endpoint[],
  ): ReqState {
    const state = this.begin(reqId, modality, partIdx, numParts);
    state.origin = 'object_store';
    try {
      this.reserve(state, embedding.bytes);
      this.stage(state, embedding);
      if (receiveCount !== undefined) state.expectReceivers(receiveCount);
      for (const endpoint of acked) {
        const dest = state.addDestination(endpoint, 'send');
        state.startSend(dest);
        state.ack(dest, embedding.bytes, this.clock.now());
      }
    } catch (err) {
      this.discard(state);
      throw err;
    } finally {
      state.endEncode();
    }
    return state;
  }

  /**
   * The state leaves this process without a release (handed to the cluster at shutdown):
   * its bytes return to the budget, and nothing remembers it as released here.
   */
  handOff(state: ReqState): void {
    if (this.states.get(state.reqId) !== state) return;
    state.handedOff = true;
    this.states.delete(state.reqId);
    this.usedBytes -= state.end();
  }

  private applyDeferred(state: ReqState): void {
    this.end(state, state.releaseReason);
    this.events.emit('release.deferred-applied', state.reqId);
  }

  /**
   * release: the one release path, idempotent. While an encode or a send is active the
   * release is deferred (the scheduler skips the work if it has not run yet); for an
   * unknown req_id a tombstone makes a later encode of it fail fast instead of staging
   * what nobody wants.
   */
  release(reqId: string, reason: 'explicit' | 'ack' = 'explicit'): ReleaseOutcome {
    const state = this.states.get(reqId);
    if (!state) {
      if (this.tombstones.has(reqId)) return 'already-tombstoned';
      boundedSet(
        this.tombstones,
        reqId,
        this.clock.now() + this.config.timeouts.sendTimeoutMs,
        MAX_TOMBSTONES,
      );
      return 'tombstoned';
    }
    if (state.requestRelease(reason) === 'deferred') return 'deferred';
    this.end(state, reason);
    return 'released';
  }

  /** A failed encode: frees the state at once, whatever runs for it. */
  discard(state: ReqState): void {
    this.end(state, 'error');
  }

  /** Releases states idle for longer than EPD_SEND_TIMEOUT_MS and drops expired tombstones. */
  sweep(): string[] {
    const now = this.clock.now();
    const ttl = this.config.timeouts.sendTimeoutMs;
    const expired: string[] = [];
    for (const state of this.states.values()) {
      if (state.idleFor(now, ttl)) {
        this.end(state, 'ttl');
        expired.push(state.reqId);
      }
    }
    expireOrdered(this.tombstones, now);
    expireOrdered(this.recentlyReleased, now);
    expireOrdered(this.failures, now);
    return expired;
  }

  list(): ReqState[] {
    return [...this.states.values()];
  }

  /** Applies release or expiry: the state leaves the store and its bytes return to the budget. */
  private end(state: ReqState, reason: ReleaseReason): void {
    if (this.states.get(state.reqId) !== state) return;
    this.states.delete(state.reqId);
    this.releases[reason]++;
    this.usedBytes -= state.end();
    this.events.emit('request.ended', state.reqId, reason);
    boundedSet(
      this.recentlyReleased,
      state.reqId,
      this.clock.now() + this.config.timeouts.sendTimeoutMs,
      MAX_RECENTLY_RELEASED,
    );
  }

  /** Age of the oldest staged embedding still held (0 when none); O(states), for scrapes. */
  oldestStagedAgeMs(): number {
    let oldest = Infinity;
    for (const s of this.states.values()) {
      const at = s.stagedAt;
      if (at !== undefined && s.embedding && at < oldest) oldest = at;
    }
    return oldest === Infinity ? 0 : Math.max(0, this.clock.now() - oldest);
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
      recentlyReleased: this.recentlyReleased.size,
      recentFailures: this.failures.size,
      startWaiters: this.startWaiterCount,
    };
  }
}
