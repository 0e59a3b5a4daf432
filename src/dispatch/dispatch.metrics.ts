import { Injectable } from '@nestjs/common';
import { Gauge } from 'prom-client';
import { OwnedMetrics } from '../metrics/owned-metrics';
import { WorkerSupervisor } from './worker-supervisor.service';

/** The DP supervisor's view of its workers, read at scrape time. */
@Injectable()
export class DispatchMetrics extends OwnedMetrics {
  constructor(supervisor: WorkerSupervisor) {
    super();
    const ranks = supervisor.ranks;
    this.own(
      new Gauge({
        name: 'epd_dp_workers',
        help: 'DP worker processes by state: alive (ready for calls) or down',
        labelNames: ['state'],
        collect() {
          const alive = supervisor.aliveCount;
          this.set({ state: 'alive' }, alive);
          this.set({ state: 'down' }, ranks.length - alive);
        },
      }),
    );
    this.own(
      new Gauge({
        name: 'epd_dp_pending_requests',
        help: 'Calls in flight from the supervisor to each DP worker (encodes and control calls)',
        labelNames: ['dp_rank'],
        collect() {
          for (const r of ranks) this.set({ dp_rank: String(r.rank) }, r.pending);
        },
      }),
    );
    const perRank = (read: (r: (typeof ranks)[number]) => number) => () =>
      Object.fromEntries(ranks.map((r) => [String(r.rank), read(r)]));
    this.ownTotals(
      'epd_dp_dispatched_total',
      'Calls the supervisor sent to each DP worker',
      'dp_rank',
      perRank((r) => r.dispatched),
    );
    this.ownTotals(
      'epd_dp_worker_restarts_total',
      'DP worker respawns after a death',
      'dp_rank',
      perRank((r) => r.restarts),
    );
  }
}
