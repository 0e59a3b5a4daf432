import { Injectable, Logger, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { Clock } from '../../common/clock';
import { Errors } from '../../common/errors/error-catalogue';
import { MMError } from '../../common/errors/mm-error';
import { AppConfig } from '../../config/app-config';
import { MetaRegistry } from '../../meta-registry/meta-registry.service';
import { DTYPE_BYTES } from '../../transfer/frame';
import { EncoderBackend } from '../backend/encoder-backend';
import { EncodeScheduler } from '../scheduler/encode-scheduler.service';
import type { EncodeRequest } from './encode-request.schema';
import { EncoderMetrics } from './encoder.metrics';
import { MediaLoader } from '../media/media-loader.service';
import type { EncodeResponse, StageTimings } from './encode-response';
import { forwardPart, type PreprocessFailed } from '../preprocess/preprocess.types';
import { checkItemCount, checkPlan } from '../preprocess/request-caps';
import { Preprocessor } from '../preprocess/preprocessor.service';
import { DeliveryService } from '../../delivery/delivery.service';
import { ProfilerService } from '../../profiling/profiler.service';
import { ReqStateStore, type ReqState } from '../../requests/req-state.store';

const round = (ms: number) => Math.round(ms * 1000) / 1000;

/**
 * A delivery failure after staging: the embedding is good and stays staged (receivers may
 * retry with `send`), so the encode fails without publishing {error} or freeing it.
 */
class DeliveryFailedAfterStage extends Error {
  constructor(readonly error: unknown) {
    super('delivery failed after staging');
  }
}

/**
 * The encode pipeline: admit → load → preprocess (worker threads) → publish metadata →
 * batched forward (inference worker) → stage → publish again → reply. Every failure after
 * admission publishes `{error}` so waiters fail fast with the real reason, and frees the
 * request's state and staging bytes.
 */
@Injectable()
export class EncoderService implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger(EncoderService.name);
  private pending = 0;
  private closing = false;
  private readonly bytesPerValue: number;

  constructor(
    private readonly config: AppConfig,
    private readonly clock: Clock,
    private readonly loader: MediaLoader,
    private readonly preprocessor: Preprocessor,
    private readonly backend: EncoderBackend,
    private readonly scheduler: EncodeScheduler,
    private readonly states: ReqStateStore,
    private readonly registry: MetaRegistry,
    private readonly metrics: EncoderMetrics,
    private readonly profiler: ProfilerService,
    private readonly delivery: DeliveryService,
  ) {
    this.bytesPerValue = DTYPE_BYTES[config.encoder.stagingDtype];
  }

  onModuleInit(): void {
    // Load the models now, so the first request does not pay for it; readiness reports it.
    this.backend.info().catch((err: unknown) => {
      if (!this.closing) this.logger.error({ err }, 'model load failed');
    });
  }

  onModuleDestroy(): void {
    this.closing = true;
  }

  get pendingRequests(): number {
    return this.pending;
  }

  async encode(req: EncodeRequest, deadline: number): Promise<EncodeResponse> {
    const started = this.clock.elapsed();
    const max = this.config.encoder.maxPending;
    if (this.pending >= max) {
      this.metrics.request(req.modality, 'rejected');
      throw Errors.atCapacity(this.pending, max, req.req_id);
    }
    this.pending++;
    this.metrics.received(req.modality);
    // Released before it began: waiters learn it at once instead of at their deadline.
    const tombstoned = this.states.isTombstoned(req.req_id);
    let state: ReqState;
    try {
      state = this.states.begin(req.req_id, req.modality, req.part_idx, req.num_parts);
    } catch (err) {
      this.pending--;
      this.metrics.request(req.modality, 'rejected');
      if (tombstoned && err instanceof MMError) await this.publishError(req, err.message);
      throw err;
    }
    try {
      const response = await this.pipeline(req, state, deadline, started);
      this.metrics.request(req.modality, 'success');
      this.profiler.step();
      return response;
    } catch (caught) {
      this.metrics.request(req.modality, 'error');
      if (caught instanceof DeliveryFailedAfterStage) throw caught.error;
      const err = caught;
      const message = err instanceof MMError ? err.message : 'internal error';
      await this.publishError(req, message);
      this.states.drop(state);
      if (!(err instanceof MMError))
        this.logger.error({ req_id: req.req_id, err }, 'encode failed');
      throw err;
    } finally {
      this.states.finishEncode(state);
      this.pending--;
    }
  }

  private async pipeline(
    req: EncodeRequest,
    state: ReqState,
    deadline: number,
    started: number,
  ): Promise<EncodeResponse> {
    const { req_id: reqId } = req;
    const caps = this.config.encoder;
    checkItemCount(req.mm_items.length, caps, reqId);
    const loadStart = this.clock.elapsed();
    const bytes = await Promise.all(
      req.mm_items.map((item) => this.loader.load(item, reqId, deadline)),
    );
    const loadMs = this.clock.elapsed() - loadStart;
    this.checkReleased(state);

    // Headers first: the caps and the staging reservation are checked before a pixel or a
    // sample is decoded, so a few KB of request cannot allocate GBs on its way to a 507.
    const planStart = this.clock.elapsed();
    const plan = this.preprocessOk(req, await this.preprocessor.plan(req.modality, bytes));
    const planMs = this.clock.elapsed() - planStart;
    checkPlan(plan, caps, reqId);
    const info = await this.backend.info();
    const dim = req.modality === 'audio' ? info.audioDim : info.visionDim;
    const size = plan.tokens * dim * this.bytesPerValue;
    this.states.reserve(state, size);
    this.checkReleased(state);

    const preStart = this.clock.elapsed();
    const pre = this.preprocessOk(req, await this.preprocessor.run(req.modality, bytes));
    const preWall = this.clock.elapsed() - preStart;
    if (pre.tokens !== plan.tokens) throw Errors.planMismatch(pre.tokens, plan.tokens, reqId);
    this.checkReleased(state);

    const meta = { embedding_size: size, embedding_len: pre.tokens, embedding_dim: dim };
    await this.registry.publish(reqId, meta, req.part_idx);

    const result = await this.scheduler.submit({
      reqId,
      kind: pre.kind,
      fusable: req.modality !== 'video',
      part: forwardPart(pre),
      deadline,
      cancelled: () => state.releaseRequested,
    });
    this.checkReleased(state);

    const stageStart = this.clock.elapsed();
    if (result.dim !== dim || result.output.tokens !== pre.tokens) {
      throw Errors.tokenMismatch(result.output.tokens, pre.tokens, reqId);
    }
    this.states.stage(state, {
      data: result.output.data,
      tokens: pre.tokens,
      dim,
      dtype: this.config.encoder.stagingDtype,
      bytes: result.output.data.byteLength,
    });
    await this.registry.publish(
      reqId,
      { ...meta, embedding_size: result.output.data.byteLength },
      req.part_idx,
    );
    const stageMs = this.clock.elapsed() - stageStart;

    const port = Array.isArray(req.embedding_port) ? req.embedding_port[0] : req.embedding_port;
    const target = req.prefill_host && port ? { host: req.prefill_host, port } : undefined;
    const destinations = await this.delivery
      .afterStage(state, target, deadline)
      .catch((err: unknown) => {
        throw new DeliveryFailedAfterStage(err);
      });

    const timings: StageTimings = {
      queue_ms: round(result.queueMs),
      load_ms: round(loadMs),
      plan_ms: round(planMs),
      preprocess_wait_ms: round(Math.max(0, preWall - pre.ms)),
      preprocess_ms: round(pre.ms),
      forward_ms: round(result.forwardMs),
      stage_ms: round(stageMs),
      total_ms: round(this.clock.elapsed() - started),
      batch_size: result.batchSize,
    };
    this.metrics.timings(req.modality, timings);
    return {
      req_id: reqId,
      part_idx: req.part_idx,
      embedding_size: result.output.data.byteLength,
      embedding_len: pre.tokens,
      embedding_dim: dim,
      timings,
      ...(destinations ? { destinations } : {}),
    };
  }

  /** A failed plan or preprocess as the 400 SGLang gives: load (undecodable) or process. */
  private preprocessOk<T extends { ok: true }>(
    req: EncodeRequest,
    result: T | PreprocessFailed,
  ): T {
    if (result.ok) return result;
    const item = req.mm_items[result.itemIndex]?.url ?? '';
    throw result.stage === 'load'
      ? Errors.loadFailed(item, result.message, req.req_id)
      : Errors.processFailed(result.message, req.req_id);
  }

  private checkReleased(state: { releaseRequested: boolean; reqId: string }): void {
    if (state.releaseRequested) throw Errors.releasedDuringEncode(state.reqId);
  }

  private async publishError(req: EncodeRequest, message: string): Promise<void> {
    try {
      await this.registry.publish(req.req_id, { error: message }, req.part_idx);
    } catch (err) {
      this.logger.warn(
        { req_id: req.req_id, err: (err as Error).message },
        'could not publish error metadata',
      );
    }
  }
}
