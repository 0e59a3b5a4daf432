import { Injectable } from '@nestjs/common';
import { OwnedMetrics } from '../metrics/owned-metrics';
import { WorkerSupervisor } from './worker-supervisor.service';

/** The DP supervisor's view of its workers, read at scrape time. */
@Injectable()
export class DispatchMetrics extends OwnedMetrics {
  constructor(supervisor: WorkerSupervisor) {
    super();
    const ranks = supervisor.ranks;
    this.gauge('epd_encoder_dp_workers', () => {
      const alive = supervisor.aliveCount;
      return { alive, down: ranks.length - alive };
    });
    const perRank = (read: (r: (typeof ranks)[number]) => number) => () =>
      Object.fromEntries(ranks.map((r) => [String(r.rank), read(r)]));
    this.gauge(
      'epd_encoder_dp_pending_requests',
      perRank((r) => r.pending),
    );
    this.ownTotals(
      'epd_encoder_dp_dispatched_total',
      perRank((r) => r.dispatched),
    );
    this.ownTotals(
      'epd_encoder_dp_worker_restarts_total',
      perRank((r) => r.restarts),
    );
  }
}
