import { Injectable } from '@nestjs/common';
import {
  AggregatorRegistry,
  Gauge,
  register,
  type MetricObjectWithValues,
  type MetricValue,
  type PrometheusContentType,
  type Registry,
} from 'prom-client';
import { LocalRanks } from '../routing/local-ranks';
import { family } from './catalogue';

export type MetricsJson = MetricObjectWithValues<MetricValue<string>>[];

/**
 * This process's registry, or with `ranks` (a DP supervisor) one merged with every worker's,
 * and `epd_encoder_dp_metrics_scraped` saying, rank by rank, whether its series are in it: a
 * worker that is down or slow to answer is then seen as left out of this scrape, not as a
 * rank whose counters vanished.
 */
export async function metricsOf(ranks: LocalRanks): Promise<Registry> {
  if (!ranks.active) return register;
  const own = (await register.getMetricsAsJSON()) as MetricsJson;
  const { answers, missing } = await ranks.ask('metrics');
  const merged = AggregatorRegistry.aggregate<PrometheusContentType>([
    own,
    ...answers.map((w) => w.value),
  ]);
  const scraped = new Gauge({ ...family('epd_encoder_dp_metrics_scraped'), registers: [merged] });
  for (const a of answers) scraped.set({ dp_rank: String(a.rank) }, 1);
  for (const m of missing) scraped.set({ dp_rank: String(m.dp_rank) }, 0);
  return merged;
}

/**
 * This process's metrics; a DP supervisor's include every live worker's, merged by
 * prom-client's AggregatorRegistry (series of different ranks stay apart by `dp_rank`).
 * A worker that does not answer within a second is left out of that read, and
 * `epd_encoder_dp_metrics_scraped{dp_rank}` is 0 for it. The dashboard
 * reads through here; /metrics calls metricsOf() itself (its controller lives in
 * PrometheusModule's scope).
 */
@Injectable()
export class MetricsSource {
  /** The supervisor's workers (DispatchModule); none in a single process or a worker. */
  constructor(private readonly ranks: LocalRanks) {}

  async json(): Promise<MetricsJson> {
    return await (await metricsOf(this.ranks)).getMetricsAsJSON();
  }
}
