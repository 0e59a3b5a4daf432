import { Injectable } from '@nestjs/common';
import { Errors } from '../../common/errors/error-catalogue';
import { AppConfig } from '../../config/app-config';
import { ProfilerService } from '../../profiling/profiler.service';
import type { Modality } from '../encode-request.schema';
import { EncoderMetrics, type EncodeOutcome, type EncodeReport } from './encoder.metrics';
import { WorkBudget } from './work-budget';

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
  /** Every request's loaded media and planned decode and model input, at once. */
  readonly work: WorkBudget;

  constructor(
    private readonly config: AppConfig,
    private readonly metrics: EncoderMetrics,
    private readonly profiler: ProfilerService,
  ) {
    this.work = new WorkBudget(config.encoder.workMaxBytes);
    metrics.pendingFrom(() => this.pending);
    metrics.workFrom(this.work);
  }

  /** Requests admitted and not yet answered. */
  get pendingRequests(): number {
    return this.pending;
  }

  /** Admits one request, or fails with 503 when EPD_MAX_PENDING are already in flight. */
  admit(modality: Modality, reqId: string): void {
    const max = this.config.encoder.maxPending;
    if (this.pending >= max) {
      const error = Errors.atCapacity(this.pending, max, reqId);
      this.metrics.request(modality, 'rejected', { error });
      throw error;
    }
    this.pending++;
    this.metrics.received(modality);
  }

  /** An admitted request was answered: `rejected` when it never began (a 409 at begin). */
  settle(modality: Modality, outcome: EncodeOutcome, report?: EncodeReport): void {
    this.pending--;
    this.metrics.request(modality, outcome, report);
    if (outcome === 'success') this.profiler.step();
  }
}
