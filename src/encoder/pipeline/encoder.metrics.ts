import { Injectable } from '@nestjs/common';
import { Counter, Gauge, Histogram } from 'prom-client';
import { OwnedMetrics } from '../../metrics/owned-metrics';
import { EncodeScheduler } from '../scheduler/encode-scheduler.service';
import type { Modality } from './encode-request.schema';
import type { StageTimings } from './encode-response';
import { ReqStateStore } from '../../requests/req-state.store';

const STAGES = [
  'load',
  'plan',
  'preprocess_wait',
  'preprocess',
  'queue',
  'forward',
  'stage',
  'total',
] as const;

const MODEL_STAGES: ReadonlySet<string> = new Set([
  'plan',
  'preprocess_wait',
  'preprocess',
  'queue',
  'forward',
]);

/** Encoder metrics (SGLang's families, `epd_` prefixed). Health probes are not counted. */
@Injectable()
export class EncoderMetrics extends OwnedMetrics {
  private readonly receivedTotal: Counter<'modality'>;
  private readonly requestsTotal: Counter<'modality' | 'status'>;
  private readonly stageSeconds: Histogram<'modality' | 'stage'>;

  constructor(scheduler: EncodeScheduler, states: ReqStateStore) {
    super();
    this.receivedTotal = this.own(
      new Counter({
        name: 'epd_encoder_requests_received_total',
        help: 'Encode requests admitted',
        labelNames: ['modality'],
      }),
    );
    this.requestsTotal = this.own(
      new Counter({
        name: 'epd_encoder_requests_total',
        help: 'Encode outcomes (success, error, rejected at admission)',
        labelNames: ['modality', 'status'],
      }),
    );
    this.stageSeconds = this.own(
      new Histogram({
        name: 'epd_encoder_stage_seconds',
        help: 'Per-stage encode latency: media load, preprocess pool wait, preprocess, forward queue wait, forward, stage, total',
        labelNames: ['modality', 'stage'],
        buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      }),
    );
    const seen: Record<string, number> = {};
    this.own(
      new Counter({
        name: 'epd_encoder_forwards_total',
        help: 'Model forwards by the number of requests fused into them',
        labelNames: ['batch_size'],
        collect() {
          for (const [size, count] of Object.entries(scheduler.stats().batchSizes)) {
            const delta = count - (seen[size] ?? 0);
            if (delta > 0) this.inc({ batch_size: size }, delta);
            seen[size] = count;
          }
        },
      }),
    );
    this.own(
      new Gauge({
        name: 'epd_encoder_queue_depth',
        help: 'Preprocessed requests waiting for a forward',
        collect() {
          this.set(scheduler.stats().queued);
        },
      }),
    );
    this.own(
      new Gauge({
        name: 'epd_encoder_staged_bytes',
        help: 'Bytes held against EPD_STAGING_MAX_BYTES (reserved and staged)',
        collect() {
          this.set(states.stats().usedBytes);
        },
      }),
    );
    this.own(
      new Gauge({
        name: 'epd_encoder_active_requests',
        help: 'Requests with state on this worker (encoding or staged)',
        collect() {
          this.set(states.stats().states);
        },
      }),
    );
  }

  received(modality: Modality): void {
    this.receivedTotal.inc({ modality });
  }

  request(modality: Modality, status: 'success' | 'error' | 'rejected'): void {
    this.requestsTotal.inc({ modality, status });
  }

  timings(modality: Modality, t: StageTimings): void {
    for (const stage of STAGES) {
      // Served from the cache: the model stages did not run, and are not 0 s samples.
      if (t.batch_size === 0 && MODEL_STAGES.has(stage)) continue;
      this.stageSeconds.observe({ modality, stage }, t[`${stage}_ms`] / 1000);
    }
  }
}
