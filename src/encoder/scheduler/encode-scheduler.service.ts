import { Injectable, Logger } from '@nestjs/common';
import { Clock } from '../../common/clock';
import { LifecycleEvents } from '../../common/lifecycle-events';
import { Errors } from '../../common/errors/error-catalogue';
import { MMError } from '../../common/errors/mm-error';
import { AppConfig } from '../../config/app-config';
import { EncoderBackend } from '../backend/encoder-backend';
import type { ForwardOutput, ForwardPart, StagingDtype } from '../backend/forward.types';
import type { ModelKind } from '../pipeline/model-contract';
import { discard } from '../workers/parcel';

export interface ScheduledResult {
  output: ForwardOutput;
  dim: number;
  forwardMs: number;
  queueMs: number;
  batchSize: number;
}

export interface JobSpec {
  reqId: string;
  kind: ModelKind;
  /** Vision: the served model that runs it (absent: the default); never fused with another's. */
  model?: string;
  /** Images and audio fuse with their neighbours; video runs alone. */
  fusable: boolean;
  part: ForwardPart;
  /** Media items in the part (for epd_encoder_mm_items_per_batch). */
  items: number;
  /** Epoch ms after which the work is skipped with 504 "encoder batch timed out". */
  deadline: number;
  /** Health probes jump the queue. */
  priority?: boolean;
  /** Checked right before the forward: released work is skipped. */
  cancelled?: () => boolean;
}

interface Job extends JobSpec {
  enqueuedAt: number;
  resolve(r: ScheduledResult): void;
  reject(e: unknown): void;
}

export interface SchedulerStats {
  queued: number;
  running: boolean;
  batches: number;
  fusedBatches: number;
  isolationRetries: number;
  skippedExpired: number;
  skippedCancelled: number;
  /** batchSizes[n] = forwards that carried n requests. */
  batchSizes: Record<number, number>;
  lastBatchCompletedAt: number | null;
}

/**
 * One forward at a time per worker, fused from whatever is queued when the previous one
 * ends: an isolated request runs at once (no time window), and batches form while the
 * previous forward runs. Image and audio requests of the same model fuse up to
 * EPD_MAX_BATCH_SIZE; video runs alone. Expired or released work is skipped before it
 * runs. A failed fused batch is retried request by request so one bad input fails alone.
 *
 * With several models served, each has its own turn: the next forward is the model served
 * least recently that has work queued (its oldest request first), so a flood of one
 * model's requests delays another's by one forward at a time, not by the whole flood.
 * With one model this is plain arrival order. Health probes go first.
 */
@Injectable()
export class EncodeScheduler {
  private readonly logger = new Logger(EncodeScheduler.name);
  private readonly queue: Job[] = [];
  private running = false;
  private readonly stats_: Omit<SchedulerStats, 'queued' | 'running' | 'batches' | 'fusedBatches'> =
    {
      isolationRetries: 0,
      skippedExpired: 0,
      skippedCancelled: 0,
      batchSizes: {},
      lastBatchCompletedAt: null,
    };
  private readonly dtype: StagingDtype;
  /** Each served model's last turn (a forward counter): one entry per model, a handful. */
  private readonly turns = new Map<string, number>();
  private forwards = 0;

  constructor(
    private readonly backend: EncoderBackend,
    private readonly config: AppConfig,
    private readonly clock: Clock,
    private readonly events: LifecycleEvents,
  ) {
    this.dtype = config.encoder.stagingDtype;
  }

  submit(spec: JobSpec): Promise<ScheduledResult> {
    return new Promise<ScheduledResult>((resolve, reject) => {
      const job: Job = { ...spec, enqueuedAt: this.clock.elapsed(), resolve, reject };
      if (spec.priority) this.queue.unshift(job);
      else this.queue.push(job);
      this.pump();
    });
  }

  get busy(): boolean {
    return this.running || this.queue.length > 0;
  }

  stats(): SchedulerStats {
    let batches = 0;
    let fusedBatches = 0;
    for (const [size, count] of Object.entries(this.stats_.batchSizes)) {
      batches += count;
      if (Number(size) > 1) fusedBatches += count;
    }
    return {
      ...this.stats_,
      batches,
      fusedBatches,
      batchSizes: { ...this.stats_.batchSizes },
      queued: this.queue.length,
      running: this.running,
    };
  }

  private pump(): void {
    if (this.running) return;
    const batch = this.takeBatch();
    if (batch.length === 0) return;
    this.running = true;
    void this.run(batch).finally(() => {
      this.running = false;
      this.stats_.lastBatchCompletedAt = this.clock.now();
      this.pump();
    });
  }

  /**
   * The batch's first job: a probe at the front, else the oldest job of the model whose last
   * turn is the longest ago (a model never served yet first). Expired and cancelled jobs met
   * on the way are answered and dropped.
   */
  private headIndex(now: number): number {
    let best = -1;
    let bestTurn = Infinity;
    for (let i = 0; i < this.queue.length;) {
      const job = this.queue[i]!;
      if (!this.viable(job, now)) {
        this.queue.splice(i, 1);
        continue;
      }
      if (job.priority && i === 0) return 0;
      const turn = this.turns.get(job.model ?? '') ?? -1;
      if (turn < bestTurn) {
        best = i;
        bestTurn = turn;
      }
      i++;
    }
    return best;
  }

  /** Removes and returns the next batch; expired and cancelled jobs met on the way are answered. */
  private takeBatch(): Job[] {
    const now = this.clock.now();
    const batch: Job[] = [];
    const first = this.headIndex(now);
    if (first < 0) return batch;
    const lead = this.queue.splice(first, 1)[0]!;
    batch.push(lead);
    if (!lead.priority) this.turns.set(lead.model ?? '', ++this.forwards);
    if (!lead.fusable) return batch;
    for (let i = 0; i < this.queue.length;) {
      const job = this.queue[i]!;
      if (!this.viable(job, now)) {
        this.queue.splice(i, 1);
        continue;
      }
      const fits =
        job.fusable &&
        job.kind === lead.kind &&
        job.model === lead.model &&
        batch.length < this.config.encoder.maxBatchSize;
      if (fits) {
        batch.push(job);
        this.queue.splice(i, 1);
      } else {
        i++;
      }
      if (batch.length >= this.config.encoder.maxBatchSize) break;
    }
    return batch;
  }

  private viable(job: Job, now: number): boolean {
    if (job.cancelled?.()) {
      this.stats_.skippedCancelled++;
      discard(job.part.data);
      job.reject(Errors.releasedDuringEncode(job.reqId));
      return false;
    }
    if (now > job.deadline) {
      this.stats_.skippedExpired++;
      discard(job.part.data);
      job.reject(Errors.batchTimedOut(job.reqId));
      return false;
    }
    return true;
  }

  private async run(batch: Job[]): Promise<void> {
    try {
      await this.forward(batch);
    } catch (err) {
      if (batch.length === 1) {
        batch[0]!.reject(this.asError(err, batch[0]!.reqId));
        return;
      }
      this.logger.warn(
        { size: batch.length, err: (err as Error).message },
        'fused batch failed; retrying each request alone',
      );
      this.stats_.isolationRetries++;
      for (const job of batch) {
        try {
          await this.forward([job]);
        } catch (e) {
          job.reject(this.asError(e, job.reqId));
        }
      }
    }
  }

  private async forward(batch: Job[]): Promise<void> {
    const started = this.clock.elapsed();
    const model = batch[0]!.model;
    const result = await this.backend.forward({
      kind: batch[0]!.kind,
      ...(model !== undefined ? { model } : {}),
      parts: batch.map((j) => j.part),
      dtype: this.dtype,
    });
    this.stats_.batchSizes[batch.length] = (this.stats_.batchSizes[batch.length] ?? 0) + 1;
    if (this.events.count('forward.completed') > 0) {
      // Health probes ride along (priority jobs) but are not traffic.
      let requests = 0;
      let items = 0;
      for (const j of batch) {
        if (j.priority) continue;
        requests++;
        items += j.items;
      }
      if (requests > 0) this.events.emit('forward.completed', requests, items);
    }
    batch.forEach((job, i) =>
      job.resolve({
        output: result.outputs[i]!,
        dim: result.dim,
        forwardMs: result.forwardMs,
        queueMs: started - job.enqueuedAt,
        batchSize: batch.length,
      }),
    );
  }

  /** Worker errors arrive as plain Errors: keep their message, and an MMError's code when present. */
  private asError(err: unknown, reqId: string): MMError {
    if (err instanceof MMError) return err;
    const e = err as { message?: string; code?: unknown };
    const message = e.message ?? String(err);
    return typeof e.code === 'number'
      ? Errors.remote(message, e.code, reqId, (e as { type?: unknown }).type)
      : Errors.remote(message, 500, reqId);
  }
}
