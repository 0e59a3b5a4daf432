import { Injectable, Logger } from '@nestjs/common';
import { Clock } from '../../common/clock';
import { MMError } from '../../common/errors/mm-error';
import { DeliveryService } from '../../delivery/delivery.service';
import { MetaRegistry } from '../../meta-registry/meta-registry.service';
import { ReqStateStore, type ReqState } from '../../requests/req-state.store';
import { EncodeAdmission, type EncodeOutcome } from './encode-admission.service';
import type { EncodeReport } from './encoder.metrics';
import type { Endpoint } from '../../transfer/embedding-transport';
import type { EncodeRequest } from '../encode-request.schema';
import { EmbeddingEncoder, round } from './embedding-encoder.service';
import type { EncodeResponse, StageTimings } from '../encode-response';
import { inSpan, SpanKind } from '../../tracing/tracing';

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
 * The encode pipeline: admit → begin the request's state → encode its media into rows
 * (EmbeddingEncoder: load, the cache's single flight, plan, preprocess, publish metadata,
 * batched forward) → stage → publish again → deliver → reply. Every failure after admission publishes `{error}` so waiters fail fast with the
 * real reason, and frees the request's state and staging bytes.
 */
@Injectable()
export class EncoderService {
  private readonly logger = new Logger(EncoderService.name);

  constructor(
    private readonly clock: Clock,
    private readonly admission: EncodeAdmission,
    private readonly states: ReqStateStore,
    private readonly registry: MetaRegistry,
    private readonly delivery: DeliveryService,
    private readonly embeddings: EmbeddingEncoder,
  ) {}

  /** One `encode` span (tracing on), with a child per stage. */
  encode(req: EncodeRequest, deadline: number): Promise<EncodeResponse> {
    return inSpan(
      'encode',
      {
        'epd.req_id': req.req_id,
        'epd.modality': req.modality,
        'epd.items': req.mm_items.length,
        'epd.part_idx': req.part_idx,
      },
      async (span) => {
        const res = await this.encodeRequest(req, deadline);
        span?.setAttributes({
          'epd.embedding_len': res.embedding_len,
          'epd.embedding_dim': res.embedding_dim,
          'epd.embedding_size': res.embedding_size,
          'epd.batch_size': res.timings.batch_size,
        });
        return res;
      },
      SpanKind.SERVER,
    );
  }

  private async encodeRequest(req: EncodeRequest, deadline: number): Promise<EncodeResponse> {
    const started = this.clock.elapsed();
    // A push this encoder may not make (EPD_ALLOWED_DESTINATIONS) is refused before any work.
    await this.delivery.checkTargets(targetsOf(req), req.req_id);
    // A model this process does not serve: a 400 listing the served ones, before any work.
    this.embeddings.checkModel(req);
    const ticket = this.admission.admit(req.modality, req.req_id, req.mm_items.length);
    // Released before it began: waiters learn it at once instead of at their deadline.
    const tombstoned = this.states.isTombstoned(req.req_id);
    let state: ReqState;
    try {
      state = this.states.begin(req.req_id, req.modality, req.part_idx, req.num_parts);
    } catch (err) {
      this.admission.settle(ticket, req.modality, 'rejected', { error: err });
      if (tombstoned && err instanceof MMError) await this.publishError(req, err.message);
      throw err;
    }
    let outcome: EncodeOutcome = 'error';
    let report: EncodeReport = {};
    try {
      const response = await this.pipeline(req, state, deadline, started);
      outcome = 'success';
      report = {
        timings: response.timings,
        items: req.mm_items.length,
        tokens: response.embedding_len,
      };
      return response;
    } catch (caught) {
      if (caught instanceof DeliveryFailedAfterStage) {
        report = { error: caught.error };
        throw caught.error;
      }
      const err = caught;
      report = { error: err };
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
      this.admission.settle(ticket, req.modality, outcome, { ...report, model: req.model });
    }
  }

  private async pipeline(
    req: EncodeRequest,
    state: ReqState,
    deadline: number,
    started: number,
  ): Promise<EncodeResponse> {
    const { req_id: reqId } = req;
    const encoded = await this.embeddings.encode(req, state, deadline);

    const stageStart = this.clock.elapsed();
    const { data, slot, tokens, dim, grid, timing } = encoded;
    const bytes = data.byteLength;
    await inSpan('stage', { 'epd.bytes': bytes }, async () => {
      const embedding = {
        data,
        slot,
        tokens,
        dim,
        dtype: encoded.dtype,
        bytes,
        grid,
        ...(timing ? { timing } : {}),
      };
      try {
        this.states.stage(state, embedding);
      } catch (err) {
        slot?.drop(); // not the state's to free
        throw err;
      }
      await this.registry.publish(
        reqId,
        { embedding_size: bytes, embedding_len: tokens, embedding_dim: dim },
        req.part_idx,
        this.registry.self,
        deadline,
      );
    });
    const stageMs = this.clock.elapsed() - stageStart;

    const targets = targetsOf(req);
    const deliver = () => this.delivery.afterStage(state, targets, deadline);
    // A span only when there is a delivery to wait for (pushes, or registered receivers).
    const delivering =
      targets.length > 0 || state.receiveCount !== undefined
        ? inSpan('deliver', { 'epd.targets': targets.length }, deliver)
        : deliver();
    const destinations = await delivering.catch((err: unknown) => {
      throw new DeliveryFailedAfterStage(err);
    });

    const timings: StageTimings = {
      ...encoded.timings,
      stage_ms: round(stageMs),
      total_ms: round(this.clock.elapsed() - started),
    };
    return {
      req_id: reqId,
      part_idx: req.part_idx,
      embedding_size: bytes,
      embedding_len: tokens,
      embedding_dim: dim,
      timings,
      ...(destinations ? { destinations } : {}),
    };
  }

  private errorDeadline(): number {
    return this.clock.now() + ERROR_FRAME_MS;
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
