import type { WaitOutcome } from '../common/kernel';
import { LifecycleEvents } from '../common/lifecycle-events';
import { Injectable } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import { map, tap, TimeoutError, type Observable } from 'rxjs';
import { MMError } from '../common/errors/mm-error';
import { Errors } from '../common/errors/error-catalogue';
import { MetaRegistry, type WaitOptions } from './meta-registry.service';
import type { StoredMeta } from './meta-store';
import type { EmbeddingMeta, PublishMetadataRequest, WaitMetadataResponse } from './meta.schema';
import { failSpan, SpanKind, startSpan } from '../tracing/tracing';

/** How a wait_metadata call ended: ok, timeout (504), error, or cancelled by its caller. */
export type { WaitOutcome };

function waitOutcome(err: unknown): WaitOutcome {
  if (err instanceof TimeoutError) return 'timeout';
  if (err instanceof MMError && err.code === 499) return 'cancelled';
  return 'error';
}

/**
 * The request/response shapes of the metadata operations, shared by the NATS handlers
 * and the HTTP routes so that both transports answer identically.
 */
@Injectable()
export class MetadataService {
  /** `events`: told how each wait ended and how long it took (`wait.completed`). */
  constructor(
    private readonly registry: MetaRegistry,
    private readonly events: LifecycleEvents,
    /** One process that may outlive records of its own previous process (a shared store). */
    private readonly checksBoot: boolean,
  ) {}

  async publish(req: PublishMetadataRequest): Promise<null> {
    await this.registry.publish(req.req_id, req.metadata, req.part_idx);
    return null;
  }

  /** `timeoutMs` is already resolved and capped by the caller (the Deadlines helper). */
  wait(
    reqId: string,
    partIdx: number | undefined,
    options: WaitOptions,
  ): Observable<WaitMetadataResponse> {
    const answer = this.answer(reqId, partIdx, options);
    const observed = this.events.count('wait.completed') > 0;
    const span = startSpan('wait_metadata', { 'epd.req_id': reqId }, SpanKind.SERVER);
    if (!observed && !span) return answer;
    const started = performance.now();
    let ended = false;
    const end = (outcome: WaitOutcome, err?: unknown) => {
      if (ended) return;
      ended = true;
      if (observed)
        this.events.emit('wait.completed', outcome, (performance.now() - started) / 1000);
      if (span) {
        span.setAttribute('epd.outcome', outcome);
        if (err !== undefined) failSpan(span, err);
        span.end();
      }
    };
    return answer.pipe(
      tap({
        next: () => end('ok'),
        error: (err: unknown) => end(waitOutcome(err), err),
        unsubscribe: () => end('cancelled'),
      }),
    );
  }

  private answer(
    reqId: string,
    partIdx: number | undefined,
    options: WaitOptions,
  ): Observable<WaitMetadataResponse> {
    return this.registry.wait$(reqId, options).pipe(
      map((record) => {
        if (this.lostWithPredecessor(record)) throw Errors.embeddingLost(reqId);
        return record;
      }),
      map((record) => ({
        ...(record.metadata as EmbeddingMeta),
        req_id: reqId,
        part_idx: partIdx ?? record.partIdx ?? 0,
      })),
    );
  }

  /**
   * Metadata this instance published before it restarted (same EPD_INSTANCE_ID, another
   * process): the embedding died with that process, so a waiter is told so instead of
   * being handed a size to allocate for rows nobody can send.
   */
  private lostWithPredecessor(record: StoredMeta): boolean {
    return this.checksBoot && this.registry.stagedByEarlierProcess(record.owner);
  }

  /**
   * Whether metadata a receiver can act on is there: not for an embedding that died with
   * this service's previous process, for which `send` and `wait_metadata` answer
   * `embedding_lost` (so the three calls agree).
   */
  async has(reqId: string): Promise<{ req_id: string; present: boolean }> {
    if (this.registry.lostInRestart(reqId)) return { req_id: reqId, present: false };
    const record = await this.registry.get(reqId);
    return {
      req_id: reqId,
      present: record !== undefined && !this.lostWithPredecessor(record),
    };
  }
}
