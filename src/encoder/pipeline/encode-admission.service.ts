import { Injectable } from '@nestjs/common';
import { checkItemCount } from '../preprocess/request-caps';
import { Errors } from '../../common/errors/error-catalogue';
import { AppConfig } from '../../config/app-config';
import { ProfilerService } from '../../profiling/profiler.service';
import type { Modality } from '../encode-request.schema';
import { EncoderMetrics, type EncodeOutcome, type EncodeReport } from './encoder.metrics';
import { WorkBudget } from './work-budget';
import { LoadMeter } from './load-meter';
import { LifecycleEvents } from '../../common/lifecycle-events';

export type { EncodeOutcome } from './encoder.metrics';

/**
 * What the encode pipeline reports about itself: admission against EPD_MAX_PENDING
 * (503 `at_capacity` beyond it) and against the working-memory budget (EPD_WORK_MAX_BYTES),
 * the outcome and stage-timing metrics, and the profiler's step count. One port, so the
 * pipeline does not depend on each of them.
 */
@Injectable()
export class EncodeAdmission {
  private pending = 0;

  constructor(
    private readonly config: AppConfig,
    private readonly metrics: EncoderMetrics,
    private readonly profiler: ProfilerService,
    /** Every request's loaded media and planned decode and model input, at once. */
    readonly work: WorkBudget,
    /** Arrivals, completions and busy time: this process's input to the autoscaling signal. */
    readonly load: LoadMeter,
    private readonly events: LifecycleEvents,
  ) {}

  /** Requests admitted and not yet answered. */
  get pendingRequests(): number {
    return this.pending;
  }

  /**
   * Admits one request of `items` media items, or fails with 503 when EPD_MAX_PENDING are
   * already in flight. The ticket goes to settle().
   */
  admit(modality: Modality, reqId: string, items: number): number {
    // Before anything is counted: one ~1 MB request of many items, answered 413, once took
    // the cluster's desired encoders from 1 to 5 and held it there.
    checkItemCount(items, this.config.encoder, reqId);
    const max = this.config.encoder.maxPending;
    if (this.pending >= max) {
      this.load.refused(items);
      const error = Errors.atCapacity(this.pending, max, reqId);
      this.metrics.request(modality, 'rejected', { error });
      throw error;
    }
    this.pending++;
    this.events.emit('pipeline.pending', this.pending);
    this.metrics.received(modality);
    return this.load.arrive(items);
  }

  /** An admitted request was answered: `rejected` when it never began (a 409 at begin). */
  settle(ticket: number, modality: Modality, outcome: EncodeOutcome, report?: EncodeReport): void {
    this.pending--;
    this.events.emit('pipeline.pending', this.pending);
    this.load.done(ticket, outcome === 'success');
    this.metrics.request(modality, outcome, report);
    if (outcome === 'success') this.profiler.step();
  }
}
