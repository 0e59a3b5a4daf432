import { LifecycleEvents } from '../../common/lifecycle-events';
import { Injectable } from '@nestjs/common';
import type { Counter, Histogram } from 'prom-client';
import { MMError } from '../../common/errors/mm-error';
import { TOKEN_BUCKETS, type MetricName } from '../../metrics/catalogue';
import { OwnedMetrics } from '../../metrics/owned-metrics';
import { ReqStateStore } from '../../requests/req-state.store';
import { EncodeScheduler } from '../scheduler/encode-scheduler.service';
import type { Modality } from '../encode-request.schema';
import type { StageTimings } from '../encode-response';
import { parcelsHeld } from '../workers/parcel';
import { EncoderBackend } from '../backend/encoder-backend';
import { WorkBudget } from './work-budget';

type TimedStage =
  'load' | 'plan' | 'preprocess_wait' | 'preprocess' | 'queue' | 'forward' | 'stage' | 'total';

/** Each timing of the reply, and the histogram it feeds. */
const STAGES: readonly [TimedStage, MetricName][] = [
  ['load', 'epd_encoder_load_seconds'],
  ['plan', 'epd_encoder_plan_seconds'],
  ['preprocess_wait', 'epd_encoder_preprocess_wait_seconds'],
  ['preprocess', 'epd_encoder_preprocess_seconds'],
  ['queue', 'epd_encoder_queue_wait_seconds'],
  ['forward', 'epd_encoder_forward_seconds'],
  ['stage', 'epd_encoder_stage_seconds'],
  ['total', 'epd_encoder_request_e2e_latency_seconds'],
];

/** Stages that do not run for a request served whole from the cache. */
const MODEL_STAGES: ReadonlySet<TimedStage> = new Set([
  'plan',
  'preprocess_wait',
  'preprocess',
  'queue',
  'forward',
]);

/** Refusals for capacity or state, counted apart from failures. */
const REJECTION_CODES: ReadonlySet<number> = new Set([409, 503, 507]);

/** An error's `type` as a label: the catalogue's keys, or `other` for anything unexpected. */
export function errorType(err: unknown): string {
  if (!(err instanceof MMError)) return 'internal';
  return /^[a-z][a-z0-9_]{0,47}$/.test(err.type) ? err.type : 'other';
}

export type EncodeOutcome = 'success' | 'error' | 'rejected';

/** What an answered encode reports: timings and sizes on success, the error otherwise. */
export interface EncodeReport {
  /** The vision model the request named (absent: the default). */
  model?: string;
  timings?: StageTimings;
  items?: number;
  tokens?: number;
  error?: unknown;
}

/**
 * Encoder metrics (catalogue.ts; SGLang's families, `epd_encoder_` prefixed): counters and
 * histograms fed as each request ends, gauges read at scrape time. Health probes are not
 * counted.
 */
@Injectable()
export class EncoderMetrics extends OwnedMetrics {
  private readonly receivedTotal: Counter;
  private readonly requestsTotal: Counter;
  private readonly rejectionsTotal: Counter;
  private readonly modelRequestsTotal: Counter;
  /** The default vision model's name, and the audio tower's (the labels of requests that name none). */
  private readonly defaultVision: string;
  private readonly audioModel: string;
  private readonly stageSeconds: [TimedStage, Histogram][];
  private readonly itemsPerRequest: Histogram;
  private readonly tokensPerRequest: Histogram;

  constructor(
    scheduler: EncodeScheduler,
    states: ReqStateStore,
    backend: EncoderBackend,
    events: LifecycleEvents,
    work: WorkBudget,
  ) {
    super();
    this.info(
      'epd_encoder_model_info',
      backend.models.map((m) => ({
        name: m.name,
        family: m.family,
        reference: String(m.reference),
      })),
    );
    this.receivedTotal = this.counter('epd_encoder_requests_received_total');
    this.requestsTotal = this.counter('epd_encoder_requests_total');
    this.rejectionsTotal = this.counter('epd_encoder_rejections_total');
    this.modelRequestsTotal = this.counter('epd_encoder_model_requests_total');
    this.defaultVision = backend.models.find((m) => m.kind === 'vision')?.name ?? 'vision';
    this.audioModel = backend.models.find((m) => m.kind === 'audio')?.name ?? 'audio';
    this.stageSeconds = STAGES.map(([stage, name]) => [stage, this.histogram(name)]);
    this.itemsPerRequest = this.countHistogram('epd_encoder_mm_items_per_request');
    this.tokensPerRequest = this.histogram('epd_encoder_tokens_per_request', TOKEN_BUCKETS);
    const itemsPerBatch = this.countHistogram('epd_encoder_mm_items_per_batch');
    const requestsPerBatch = this.countHistogram('epd_encoder_requests_per_batch');
    events.on('forward.completed', (requests, items) => {
      requestsPerBatch.observe(requests);
      itemsPerBatch.observe(items);
    });
    this.gauge('epd_encoder_queue_depth', () => scheduler.stats().queued);
    this.gauge('epd_encoder_model_inputs_held', parcelsHeld);
    this.gauge('epd_encoder_staging_slab_bytes', () => backend.stagingSlab?.usedBytes ?? 0);
    this.gauge('epd_encoder_staged_bytes', () => states.stats().usedBytes);
    this.gauge('epd_encoder_staged_oldest_age_seconds', () => states.oldestStagedAgeMs() / 1000);
    this.gauge('epd_encoder_active_requests', () => states.stats().states);
    this.ownTotals('epd_encoder_releases_total', () => states.releases);
    // EPD_MAX_PENDING's count, as the admission last told it.
    let pending = 0;
    events.on('pipeline.pending', (n) => (pending = n));
    this.gauge('epd_encoder_pending_requests', () => pending);
    this.gauge('epd_encoder_work_bytes', () => work.inUse);
    this.gauge('epd_encoder_work_waiting', () => work.stats().waiting);
    this.ownTotals('epd_encoder_work_admissions_total', () => {
      const { immediate, waited, refused } = work.stats();
      return { immediate, waited, busy: refused.busy, too_large: refused.too_large };
    });
  }

  received(modality: Modality): void {
    this.receivedTotal.inc({ modality });
  }

  request(modality: Modality, outcome: EncodeOutcome, report: EncodeReport = {}): void {
    const type = outcome === 'success' ? 'none' : errorType(report.error);
    this.requestsTotal.inc({ modality, status: outcome, type });
    const model = modality === 'audio' ? this.audioModel : (report.model ?? this.defaultVision);
    this.modelRequestsTotal.inc({ model, modality, status: outcome });
    const code = report.error instanceof MMError ? report.error.code : 500;
    if (outcome !== 'success' && REJECTION_CODES.has(code))
      this.rejectionsTotal.inc({ code: String(code), type });
    if (outcome !== 'success') return;
    const t = report.timings;
    if (t) {
      for (const [stage, histogram] of this.stageSeconds) {
        // Served from the cache: the model stages did not run, and are not 0 s samples.
        if (t.batch_size === 0 && MODEL_STAGES.has(stage)) continue;
        histogram.observe({ modality }, t[`${stage}_ms`] / 1000);
      }
    }
    if (report.items !== undefined) this.itemsPerRequest.observe({ modality }, report.items);
    if (report.tokens !== undefined) this.tokensPerRequest.observe({ modality }, report.tokens);
  }
}
