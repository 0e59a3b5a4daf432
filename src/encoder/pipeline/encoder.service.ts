import { Injectable, Logger } from '@nestjs/common';
import { Clock } from '../../common/clock';
import { Errors } from '../../common/errors/error-catalogue';
import { MMError } from '../../common/errors/mm-error';
import { DeliveryService } from '../../delivery/delivery.service';
import { MetaRegistry } from '../../meta-registry/meta-registry.service';
import { ReqStateStore, type ReqState } from '../../requests/req-state.store';
import { EncodeAdmission, type EncodeOutcome } from './encode-admission.service';
import type { Endpoint } from '../../transfer/embedding-transport';
import type { EncodeRequest } from './encode-request.schema';
import type { EncodeResponse, StageTimings } from './encode-response';
import { EncodeStages } from './encode-stages.service';
import { itemGrids } from '../preprocess/preprocess.types';

const round = (ms: number) => Math.round(ms * 1000) / 1000;

/** Error frames to receivers are best effort and must not hold the failed encode's reply long. */
const ERROR_FRAME_MS = 2000;

/**
 * The receivers named in the encode request itself: `prefill_host` with one
 * `embedding_port` (SGLang's zmq_to_tokenizer) or a list of them (its legacy
 * zmq_to_scheduler form).
 */
function targetsOf(req: EncodeRequest): Endpoint[] {
  if (!req.prefill_host || req.embedding_port == null) return [];
  const ports = Array.isArray(req.embedding_port) ? req.embedding_port : [req.embedding_port];
  return ports.map((port) => ({ host: req.prefill_host!, port }));
}

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
 * The encode pipeline: admit → load → plan → preprocess (worker threads) → publish
 * metadata → batched forward (inference worker) → stage → publish again → deliver →
 * reply. Every failure after admission publishes `{error}` so waiters fail fast with the
 * real reason, and frees the request's state and staging bytes.
 */
@Injectable()
export class EncoderService {
  private readonly logger = new Logger(EncoderService.name);

  constructor(
    private readonly clock: Clock,
    private readonly admission: EncodeAdmission,
    private readonly stages: EncodeStages,
    private readonly states: ReqStateStore,
    private readonly registry: MetaRegistry,
    private readonly delivery: DeliveryService,
  ) {}

  async encode(req: EncodeRequest, deadline: number): Promise<EncodeResponse> {
    const started = this.clock.elapsed();
    this.admission.admit(req.modality, req.req_id);
    // Released before it began: waiters learn it at once instead of at their deadline.
    const tombstoned = this.states.isTombstoned(req.req_id);
    let state: ReqState;
    try {
      state = this.states.begin(req.req_id, req.modality, req.part_idx, req.num_parts);
    } catch (err) {
      this.admission.settle(req.modality, 'rejected');
      if (tombstoned && err instanceof MMError) await this.publishError(req, err.message);
      throw err;
    }
    let outcome: EncodeOutcome = 'error';
    let timings: StageTimings | undefined;
    try {
      const response = await this.pipeline(req, state, deadline, started);
      outcome = 'success';
      timings = response.timings;
      return response;
    } catch (caught) {
      if (caught instanceof DeliveryFailedAfterStage) throw caught.error;
      const err = caught;
      const message = err instanceof MMError ? err.message : 'internal error';
      const code = err instanceof MMError ? err.code : 500;
      await Promise.all([
        this.publishError(req, message),
        this.delivery.failed(state, targetsOf(req), { message, code }, this.errorDeadline()),
      ]);
      this.states.discard(state);
      if (!(err instanceof MMError))
        this.logger.error({ req_id: req.req_id, err }, 'encode failed');
      throw err;
    } finally {
      this.states.finishEncode(state);
      this.admission.settle(req.modality, outcome, timings);
    }
  }

  private async pipeline(
    req: EncodeRequest,
    state: ReqState,
    deadline: number,
    started: number,
  ): Promise<EncodeResponse> {
    const { req_id: reqId } = req;
    const loadStart = this.clock.elapsed();
    const items = await this.stages.load(req, deadline);
    const loadMs = this.clock.elapsed() - loadStart;
    this.checkReleased(state);

    // Headers first: the caps and the staging reservation come before any decoding.
    const planStart = this.clock.elapsed();
    const size = await this.stages.plan(req, items);
    const planMs = this.clock.elapsed() - planStart;
    this.states.reserve(state, size.bytes);
    this.checkReleased(state);

    const preStart = this.clock.elapsed();
    const pre = await this.stages.preprocess(req, items, size);
    const preWall = this.clock.elapsed() - preStart;
    this.checkReleased(state);

    const meta = {
      embedding_size: size.bytes,
      embedding_len: size.tokens,
      embedding_dim: size.dim,
    };
    await this.registry.publish(reqId, meta, req.part_idx, this.registry.self);

    const result = await this.stages.forward(
      req,
      pre,
      size,
      deadline,
      () => state.releaseRequested,
    );
    this.checkReleased(state);

    const stageStart = this.clock.elapsed();
    const bytes = result.output.data.byteLength;
    this.states.stage(state, {
      data: result.output.data,
      tokens: size.tokens,
      dim: size.dim,
      dtype: this.stages.stagingDtype,
      bytes,
      grid: itemGrids(pre),
    });
    await this.registry.publish(
      reqId,
      { ...meta, embedding_size: bytes },
      req.part_idx,
      this.registry.self,
    );
    const stageMs = this.clock.elapsed() - stageStart;

    const destinations = await this.delivery
      .afterStage(state, targetsOf(req), deadline)
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
    return {
      req_id: reqId,
      part_idx: req.part_idx,
      embedding_size: bytes,
      embedding_len: size.tokens,
      embedding_dim: size.dim,
      timings,
      ...(destinations ? { destinations } : {}),
    };
  }

  private errorDeadline(): number {
    return this.clock.now() + ERROR_FRAME_MS;
  }

  private checkReleased(state: ReqState): void {
    if (state.releaseRequested) throw Errors.releasedDuringEncode(state.reqId);
  }

  private async publishError(req: EncodeRequest, message: string): Promise<void> {
    try {
      await this.registry.publish(req.req_id, { error: message }, req.part_idx, this.registry.self);
    } catch (err) {
      this.logger.warn(
        { req_id: req.req_id, err: (err as Error).message },
        'could not publish error metadata',
      );
    }
  }
}
