import { Injectable } from '@nestjs/common';
import {
  AggregatorRegistry,
  register,
  type MetricObjectWithValues,
  type MetricValue,
  type Registry,
} from 'prom-client';
import { LocalRanks } from '../routing/local-ranks';

export type MetricsJson = MetricObjectWithValues<MetricValue<string>>[];

/** This process's registry, or with `ranks` (a DP supervisor) one merged with every worker's. */
export async function metricsOf(ranks: LocalRanks): Promise<Registry> {
  if (!ranks.active) return register;
  const own = (await register.getMetricsAsJSON()) as MetricsJson;
  const workers = await ranks.gather('metrics');
  return AggregatorRegistry.aggregate([own, ...workers.map((w) => w.value)]);
}

/**
 * This process's metrics; a DP supervisor's include every live worker's, merged by
 * prom-client's AggregatorRegistry (series of different ranks stay apart by `dp_rank`).
 * A worker that does not answer within a second is left out of that read. The dashboard
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
