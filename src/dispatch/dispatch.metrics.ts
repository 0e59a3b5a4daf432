import { Injectable } from '@nestjs/common';
import { Counter, Gauge } from 'prom-client';
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
    const counter = (name: string, help: string, read: (r: (typeof ranks)[number]) => number) => {
      const last = ranks.map(() => 0);
      this.own(
        new Counter({
          name,
          help,
          labelNames: ['dp_rank'],
          collect() {
            for (const r of ranks) {
              const now = read(r);
              this.inc({ dp_rank: String(r.rank) }, now - last[r.rank]!);
              last[r.rank] = now;
            }
          },
        }),
      );
    };
    counter(
      'epd_dp_dispatched_total',
      'Calls the supervisor sent to each DP worker',
      (r) => r.dispatched,
    );
    counter('epd_dp_worker_restarts_total', 'DP worker respawns after a death', (r) => r.restarts);
  }
}
