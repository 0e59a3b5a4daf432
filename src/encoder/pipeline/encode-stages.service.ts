import { DEFAULT_VIDEO_FPS, takesTiming, videoTiming, type VideoTiming } from '../video-timing';
import { Injectable, Logger, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { Errors, quotedList } from '../../common/errors/error-catalogue';
import { Readiness } from '../../common/readiness';
import { AppConfig } from '../../config/app-config';
import { DTYPE_BYTES } from '../../transfer/frame';
import { EncoderBackend } from '../backend/encoder-backend';
import type { ModelInfo, StagingDtype } from '../backend/forward.types';
import { MediaLoader } from '../../media/media-loader.service';
import {
  forwardPart,
  type PreprocessFailed,
  type PreprocessOk,
} from '../preprocess/preprocess.types';
import { checkItemCount, checkPlan } from '../preprocess/request-caps';
import { Preprocessor } from '../preprocess/preprocessor.service';
import { EncodeScheduler, type ScheduledResult } from '../scheduler/encode-scheduler.service';
import type { EncodeRequest } from '../encode-request.schema';
import { inSpan } from '../../tracing/tracing';
import { discard } from '../workers/parcel';
import { plannedWorkBytes } from './work-budget';

/** What a request will cost, known from the headers before anything is decoded. */
export interface EncodeSize {
  tokens: number;
  /** Per item (images, audio clips), or one entry for a video. */
  itemTokens: number[];
  dim: number;
  /** tokens × dim × the staging dtype's width: what the receiver allocates. */
  bytes: number;
  /** Images: each item's smart-resized size (height, width), for the preprocessing. */
  itemSizes: [number, number][];
  /** Working memory from decode to the end of the forward (see WorkBudget). */
  workBytes: number;
  /** Video: the frames sent, and those kept (EPD_MAX_VIDEO_FRAMES). */
  frames?: { sent: number; kept: number };
}

/**
 * The model-facing stages of one encode, each with its own checks: load the media (item
 * count, size and address caps), plan it from its headers (per-request caps, the size to
 * reserve), preprocess it into the patch grid, and run the batched forward. The pipeline
 * orders them and owns the request's state; this owns how each stage is done.
 */
@Injectable()
export class EncodeStages implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('EncodeStages');
  private closing = false;
  readonly stagingDtype: StagingDtype;
  readonly bytesPerValue: number;

  constructor(
    private readonly config: AppConfig,
    private readonly loader: MediaLoader,
    private readonly preprocessor: Preprocessor,
    private readonly backend: EncoderBackend,
    private readonly scheduler: EncodeScheduler,
    private readonly readiness: Readiness,
  ) {
    this.stagingDtype = config.encoder.stagingDtype;
    this.bytesPerValue = DTYPE_BYTES[this.stagingDtype];
  }

  /** The loaded models' facts; rejects when they cannot load or break the contract. */
  models(): Promise<ModelInfo> {
    return this.backend.info();
  }

  /**
   * The served vision model a request names (`model`), or the default when it names none:
   * an unknown name is a 400 that lists the served ones, before anything is loaded. Audio
   * is the default model's tower's.
   */
  modelOf(req: EncodeRequest): string {
    const { models, defaultModel } = this.preprocessor;
    const name = req.model ?? defaultModel;
    if (!models.has(name)) throw Errors.unknownModel(name, quotedList(models.keys()), req.req_id);
    if (req.modality === 'audio' && name !== defaultModel)
      throw Errors.audioOnDefaultModel(name, defaultModel, req.req_id);
    // Refused rather than encoded to a grid or values the receiver disagrees with: Qwen3-VL's
    // and InternVL's video processors are their directories' video_preprocessor_config.json
    // (Qwen3-VL's pixel bounds; InternVL's tile size and normalisation).
    const { family, geometry, video } = models.get(name)!;
    if (req.modality === 'video' && family.startsWith('qwen3-vl') && !video)
      throw Errors.videoNotYet(
        name,
        family,
        "its directory has no video_preprocessor_config.json, whose pixel bounds decide a video's grid",
        req.req_id,
      );
    if (req.modality === 'video' && geometry.tiling && !video)
      throw Errors.videoNotYet(
        name,
        family,
        "its directory has no video_preprocessor_config.json, whose size and normalisation decide each frame's tile",
        req.req_id,
      );
    return name;
  }

  /** The file of the model that encodes `req` (the cache's fingerprint reads its bytes). */
  async modelPathOf(req: EncodeRequest): Promise<string> {
    const info = await this.backend.info();
    return req.modality === 'audio'
      ? info.audioPath
      : (info.visionModels[this.modelOf(req)]?.path ?? info.visionPath);
  }

  onModuleInit(): void {
    // Load the models now, so the first request does not pay for it; serve once loaded.
    this.readiness.require('model', this.backend.info());
    this.backend.info().catch((err: unknown) => {
      if (!this.closing) this.logger.error({ err }, 'model load failed');
    });
  }

  onModuleDestroy(): void {
    this.closing = true;
  }

  /**
   * Every item's bytes, loaded concurrently within the deadline; `charge` is told of them
   * as they arrive (the work budget), and may refuse.
   */
  load(req: EncodeRequest, deadline: number, charge?: (bytes: number) => void): Promise<Buffer[]> {
    checkItemCount(req.mm_items.length, this.config.encoder, req.req_id);
    return inSpan('load', { 'epd.items': req.mm_items.length }, async (span) => {
      const items = await loadAll(req.mm_items, charge, (item, guarded) =>
        this.loader.load(item, req.req_id, deadline, guarded),
      );
      span?.setAttribute(
        'epd.bytes',
        items.reduce((n, b) => n + b.length, 0),
      );
      return items;
    });
  }

  /**
   * Headers only: the caps are checked and the size known before a pixel or a sample is
   * decoded, so a few KB of request cannot allocate GBs on its way to a 507.
   */
  plan(req: EncodeRequest, items: Buffer[]): Promise<EncodeSize> {
    return inSpan('plan', { 'epd.items': items.length }, async (span) => {
      const size = await this.planUntraced(req, items);
      span?.setAttribute('epd.tokens', size.tokens);
      return size;
    });
  }

  private async planUntraced(req: EncodeRequest, items: Buffer[]): Promise<EncodeSize> {
    const { audioMels, audioDim } = await this.backend.info();
    if (req.modality === 'audio' && audioDim === 0) throw Errors.noAudioModel(req.req_id);
    const model = this.modelOf(req);
    const plan = this.ok(req, await this.preprocessor.plan(req.modality, items, audioMels, model));
    checkPlan(plan, this.config.encoder, req.req_id);
    const dim = await this.dimOf(req.modality, model);
    const { tokens, itemTokens, itemSizes } = plan;
    const bytes = tokens * dim * this.bytesPerValue;
    return {
      tokens,
      itemTokens,
      itemSizes,
      dim,
      bytes,
      workBytes: plannedWorkBytes(plan),
      ...(req.modality === 'video'
        ? { frames: { sent: plan.sourceFrames, kept: plan.keptFrames } }
        : {}),
    };
  }

  /**
   * Whether a video request's model wants its timing beside the embedding (Qwen2.5-VL's
   * second_per_grid_ts, Qwen3-VL's timestamps: encoder/video-timing.ts).
   */
  wantsTiming(req: EncodeRequest): boolean {
    if (req.modality !== 'video') return false;
    return takesTiming(this.preprocessor.models.get(this.modelOf(req))!.family);
  }

  /** A video request's timing, from its frames (sent, and kept), at the request's `fps`. */
  timingOf(req: EncodeRequest, frames: { sent: number; kept: number }): VideoTiming | undefined {
    const m = this.preprocessor.models.get(this.modelOf(req))!;
    return videoTiming(
      m.family,
      req.fps ?? DEFAULT_VIDEO_FPS,
      frames.sent,
      frames.kept,
      m.geometry.temporalPatchSize,
    );
  }

  /** The embedding width of the model that encodes `modality` (`model`: a vision model's name). */
  async dimOf(modality: string, model?: string): Promise<number> {
    const info = await this.backend.info();
    if (modality === 'audio') return info.audioDim;
    return (model ? info.visionModels[model]?.dim : undefined) ?? info.visionDim;
  }

  /** Decode and preprocess (worker threads); must give the tokens the plan promised. */
  preprocess(req: EncodeRequest, items: Buffer[], size: EncodeSize): Promise<PreprocessOk> {
    return inSpan('preprocess', { 'epd.items': items.length }, async (span) => {
      const { audioMels } = await this.backend.info();
      const pre = this.ok(
        req,
        await this.preprocessor.run(
          req.modality,
          items,
          audioMels,
          size.itemSizes,
          this.modelOf(req),
        ),
      );
      if (pre.tokens !== size.tokens) {
        discard(pre.data);
        throw Errors.planMismatch(pre.tokens, size.tokens, req.req_id);
      }
      // The wall time includes the wait for a free thread; this is the work itself.
      span?.setAttribute('epd.preprocess_ms', pre.ms);
      return pre;
    });
  }

  /** The batched forward; skipped if `cancelled()` holds when its turn comes. */
  async forward(
    req: EncodeRequest,
    pre: PreprocessOk,
    size: EncodeSize,
    deadline: number,
    cancelled: () => boolean,
  ): Promise<ScheduledResult> {
    return inSpan('forward', { 'epd.tokens': size.tokens }, async (span) => {
      const result = await this.submit(req, pre, size, deadline, cancelled);
      span?.setAttributes({
        'epd.queue_ms': result.queueMs,
        'epd.forward_ms': result.forwardMs,
        'epd.batch_size': result.batchSize,
      });
      return result;
    });
  }

  private async submit(
    req: EncodeRequest,
    pre: PreprocessOk,
    size: EncodeSize,
    deadline: number,
    cancelled: () => boolean,
  ): Promise<ScheduledResult> {
    const model = this.modelOf(req);
    const result = await this.scheduler.submit({
      reqId: req.req_id,
      kind: pre.kind,
      // The default model's jobs carry no name, as the health probe's do: they fuse.
      ...(pre.kind === 'vision' && model !== this.preprocessor.defaultModel ? { model } : {}),
      fusable: req.modality !== 'video',
      part: forwardPart(pre),
      items: size.itemTokens.length,
      deadline,
      cancelled,
    });
    if (result.dim !== size.dim || result.output.tokens !== size.tokens) {
      result.output.slot?.drop();
      throw Errors.tokenMismatch(result.output.tokens, size.tokens, req.req_id);
    }
    return result;
  }

  /** A failed plan or preprocess as the 400 SGLang gives: load (undecodable) or process. */
  private ok<T extends { ok: true }>(req: EncodeRequest, result: T | PreprocessFailed): T {
    if (result.ok) return result;
    const item = req.mm_items[result.itemIndex]?.url ?? '';
    throw result.stage === 'load'
      ? Errors.loadFailed(item, result.message, req.req_id)
      : Errors.processFailed(result.message, req.req_id);
  }
}

/**
 * Loads every item concurrently and settles only when all have: when one fails, the
 * others are refused their next bytes (`charge` throws for them, which ends a download at
 * its next chunk and a file before it is read) and the first failure is thrown once none
 * is still running. Before, a request's sibling loads kept charging the working-memory
 * budget after the failed request had released its lease, and what they charged was never
 * given back: a malformed data URI beside 19 MiB files left 247 of 256 MiB held for good.
 */
export async function loadAll<T>(
  items: readonly T[],
  charge: ((bytes: number) => void) | undefined,
  load: (item: T, charge: ((bytes: number) => void) | undefined) => Promise<Buffer>,
): Promise<Buffer[]> {
  let failed = false;
  let firstError: unknown;
  const guarded = charge
    ? (bytes: number) => {
        if (failed) throw new Error('load cancelled: another item of the request failed');
        charge(bytes);
      }
    : undefined;
  const settled = await Promise.allSettled(
    items.map((item) =>
      load(item, guarded).catch((err: unknown) => {
        if (!failed) firstError = err;
        failed = true;
        throw err;
      }),
    ),
  );
  if (failed) throw firstError;
  return settled.map((r) => (r as PromiseFulfilledResult<Buffer>).value);
}
