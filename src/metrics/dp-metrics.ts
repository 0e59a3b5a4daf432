import { Controller, Get, Injectable, Res, UseGuards, type OnModuleInit } from '@nestjs/common';
import { PrometheusController } from '@willsoto/nestjs-prometheus';
import type { Response } from 'express';
import { register } from 'prom-client';
import { AppConfig } from '../config/app-config';
import { ParentLink } from '../transport/parent-link';
import { MetricsGuard } from './metrics.guard';
import { LocalRanks } from '../routing/local-ranks';
import { metricsOf, type MetricsJson } from './metrics-source';
import type { IpcTopic } from '../transport/ipc-topics';

/**
 * A DP worker's metrics, labelled with its `dp_rank` and handed to its supervisor on
 * request (over IPC), so that the supervisor's /metrics covers every rank.
 */
@Injectable()
export class WorkerMetricsReporter implements OnModuleInit {
  constructor(
    private readonly link: ParentLink,
    private readonly config: AppConfig,
  ) {}

  onModuleInit(): void {
    register.setDefaultLabels({ dp_rank: String(this.config.encoder.dpRank) });
    this.link.handle('metrics', async () => (await register.getMetricsAsJSON()) as MetricsJson);
  }
}

/**
 * /metrics of a DP supervisor: its own metrics and every live worker's. (It lives in
 * PrometheusModule's scope, where the global LocalRanks resolves.)
 */
@Controller()
@UseGuards(MetricsGuard)
export class DpMetricsController extends PrometheusController {
  constructor(private readonly ranks: LocalRanks) {
    super();
  }

  @Get()
  override async index(@Res({ passthrough: true }) response: Response): Promise<string> {
    const merged = await metricsOf(this.ranks);
    response.header('Content-Type', merged.contentType);
    return merged.metrics();
  }
}

/** /metrics of one process (a single process, or a DP worker's own HTTP port). */
@Controller()
@UseGuards(MetricsGuard)
export class GuardedMetricsController extends PrometheusController {}

declare module '../transport/ipc-topics' {
  interface IpcTopics {
    /** Supervisor → worker: its registry, for the supervisor's merged /metrics. */
    metrics: IpcTopic<void, MetricsJson>;
  }
}
