import type { VideoTiming } from '../video-timing';
import { Injectable } from '@nestjs/common';
import { Clock } from '../../common/clock';
import { Errors } from '../../common/errors/error-catalogue';
import { EncodeFlights, type Claim, type Rows } from '../../cache/encode-flights.service';
import { ReqStateStore, type ReqState } from '../../requests/req-state.store';
import { MetaRegistry } from '../../meta-registry/meta-registry.service';
import type { StagingDtype } from '../backend/forward.types';
import type { SlabSlot } from '../backend/staging-slab';
import { itemGrids, type PreprocessOk } from '../preprocess/preprocess.types';
import type { ScheduledResult } from '../scheduler/encode-scheduler.service';
import { discard } from '../workers/parcel';
import type { EncodeRequest } from '../encode-request.schema';
import type { StageTimings } from '../encode-response';
import { EncodeStages, type EncodeSize } from './encode-stages.service';
import { EncodeAdmission } from './encode-admission.service';
import type { WorkLease } from './work-budget';

export const round = (ms: number) => Math.round(ms * 1000) / 1000;

/** A release asked for while the request works ends it at the next step. */
export function checkReleased(state: ReqState): void {
  if (state.releaseRequested) throw Errors.releasedDuringEncode(state.reqId);
}

/** Every unit's rows, in item order, and what producing them cost. */
export interface Encoded {
  data: Rows;
  /** The slab slot `data` views, if it is one; held for the request until it is staged. */
  slot?: SlabSlot;
  tokens: number;
  dim: number;
  grid: number[][];
  dtype: StagingDtype;
  /** Video to Qwen2.5-VL or Qwen3-VL: its timing for the language side (video-timing.ts). */
  timing?: VideoTiming;
  timings: Omit<StageTimings, 'stage_ms' | 'total_ms'>;
}

/**
 * From a request's media to its rows: load, then, for the items the cache's single flight
 * leaves to this request, plan → reserve → preprocess → publish metadata → forward; the
 * rest come from the cache or from the request that encodes them. The caller owns the
 * request's state (begin, stage, deliver, fail).
 */
@Injectable()
export class EmbeddingEncoder {
  constructor(
    private readonly clock: Clock,
    private readonly stages: EncodeStages,
    private readonly flights: EncodeFlights,
    private readonly states: ReqStateStore,
    private readonly registry: MetaRegistry,
    private readonly admission: EncodeAdmission,
  ) {}

  /** Throws the 400 for a `model` this process does not serve (EncodeStages.modelOf). */
  checkModel(req: EncodeRequest): void {
    this.stages.modelOf(req);
  }

  async encode(req: EncodeRequest, state: ReqState, deadline: number): Promise<Encoded> {
    // The request's share of the working-memory budget: its loads as they arrive, then
    // each part it encodes from its plan until that part's forward ends.
    const work = this.admission.work.lease(req.req_id, this.stages.modelOf(req));
    try {
      return await this.encodeWithin(req, state, deadline, work);
    } finally {
      work.release();
    }
  }

  private async encodeWithin(
    req: EncodeRequest,
    state: ReqState,
    deadline: number,
    work: WorkLease,
  ): Promise<Encoded> {
    const modelPath = () => this.modelPath(req);
    // Trusting the caller's hashes, every item may be cached already: nothing to load.
    const hinted = await this.flights.hinted(req, modelPath);
    const loadStart = this.clock.elapsed();
    const items = hinted?.hits ? [] : await this.stages.load(req, deadline, (n) => work.charge(n));
    const loadMs = this.clock.elapsed() - loadStart;
    checkReleased(state);

    // Encoded again when a unit joined from another request failed for that one's reasons:
    // the staging reservation grows to the largest attempt, never twice.
    let reserved = 0;
    const reserve = (bytes: number) => {
      if (bytes > reserved) this.states.reserve(state, bytes - reserved);
      reserved = Math.max(reserved, bytes);
    };
    let frames: EncodeSize['frames'];
    const encoded = await this.flights.run(req, items, deadline, modelPath, hinted, (claim) =>
      this.encodeClaimed(req, state, items, claim, deadline, reserve, work, (f) => (frames = f)),
    );
    const timing = await this.timingOf(req, items, frames);
    return {
      ...encoded,
      ...(timing ? { timing } : {}),
      timings: { ...encoded.timings, load_ms: round(loadMs) },
    };
  }

  /**
   * A video's timing, for the models that want it: from the frames its plan counted, or, when
   * the cache answered it, from a plan of its headers now (cheap: nothing is decoded). A hit
   * on the caller's own hashes loaded nothing: then there is no timing to give.
   */
  private async timingOf(
    req: EncodeRequest,
    items: Buffer[],
    frames: EncodeSize['frames'],
  ): Promise<VideoTiming | undefined> {
    if (!this.stages.wantsTiming(req)) return undefined;
    if (!frames && items.length > 0) frames = (await this.stages.plan(req, items)).frames;
    return frames ? this.stages.timingOf(req, frames) : undefined;
  }

  private modelPath(req: EncodeRequest): Promise<string> {
    return this.stages.modelPathOf(req);
  }

  /**
   * Plan → reserve → preprocess → publish metadata → forward, for the items of the claim
   * that are this request's to encode (the cache neither has them nor is another request
   * encoding them; without the cache, every item); the output is every unit's rows in
   * item order.
   */
  private async encodeClaimed(
    req: EncodeRequest,
    state: ReqState,
    items: Buffer[],
    claim: Claim,
    deadline: number,
    reserve: (bytes: number) => void,
    work: WorkLease,
    planned: (frames: EncodeSize['frames']) => void,
  ): Promise<Omit<Encoded, 'timings'> & { timings: Omit<Encoded['timings'], 'load_ms'> }> {
    const mine = claim.items;
    const part =
      mine.length === items.length ? req : { ...req, mm_items: mine.map((i) => req.mm_items[i]!) };
    const partItems = mine.map((i) => items[i]!);
    const t = { plan: 0, preWall: 0, work: 0 };
    let size: EncodeSize | undefined;
    if (mine.length > 0) {
      // Headers first: the caps and the staging reservation come before any decoding.
      const planStart = this.clock.elapsed();
      size = await this.stages.plan(part, partItems);
      t.plan = this.clock.elapsed() - planStart;
      if (mine.length === items.length) planned(size.frames);
      claim.planned(size.tokens, size.itemTokens);
    }
    const tokens = await claim.tokens();
    const dim = size?.dim ?? (await this.stages.dimOf(req.modality, this.stages.modelOf(req)));
    const bytes = tokens * dim * this.stages.bytesPerValue;
    reserve(bytes);
    checkReleased(state);

    let pre: PreprocessOk | undefined;
    let result: ScheduledResult | undefined;
    try {
      if (size) {
        // Room for the decode and the model input, or a wait for it (then 503/507).
        const workStart = this.clock.elapsed();
        await work.reserve(size.workBytes, deadline);
        t.work = this.clock.elapsed() - workStart;
        checkReleased(state);
        const preStart = this.clock.elapsed();
        pre = await this.stages.preprocess(part, partItems, size);
        t.preWall = this.clock.elapsed() - preStart;
        checkReleased(state);
      }
      const meta = { embedding_size: bytes, embedding_len: tokens, embedding_dim: dim };
      await this.registry.publish(req.req_id, meta, req.part_idx, this.registry.self, deadline);
      if (size && pre) {
        result = await this.stages.forward(part, pre, size, deadline, () => state.releaseRequested);
      }
    } finally {
      // The inference thread has the model input by now, unless the request ended first:
      // then its buffer is freed here, not whenever a collection finds the port.
      discard(pre?.data);
      // Before waiting for rows other requests encode: holding room while they wait for
      // it would deadlock until the deadline.
      work.release();
    }
    // The forward's slab slot (if any) is this request's until staged: freed on any way out.
    let slot = result?.output.slot;
    let rows: { data: Rows; grid: number[][] };
    try {
      if (pre && result) {
        claim.land(result.output.data, dim, itemGrids(pre));
        checkReleased(state);
      }
      rows = await claim.rows();
    } catch (err) {
      slot?.drop();
      throw err;
    }
    if (slot && rows.data !== result?.output.data) {
      slot.drop(); // staged from a copy
      slot = undefined;
    }
    return {
      ...rows,
      slot,
      tokens,
      dim,
      dtype: this.stages.stagingDtype,
      timings: {
        queue_ms: round(result?.queueMs ?? 0),
        plan_ms: round(t.plan),
        memory_wait_ms: round(t.work),
        preprocess_wait_ms: round(Math.max(0, t.preWall - (pre?.ms ?? 0))),
        preprocess_ms: round(pre?.ms ?? 0),
        forward_ms: round(result?.forwardMs ?? 0),
        batch_size: result?.batchSize ?? 0,
        ...claim.counts(),
      },
    };
  }
}
