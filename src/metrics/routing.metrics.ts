import { Injectable } from '@nestjs/common';
import { Counter, Gauge } from 'prom-client';
import { InstanceRoster } from '../routing/instance-roster.service';
import { OwnerRouter } from '../routing/owner-router.service';
import { OwnedMetrics } from './owned-metrics';

/** Owner routing and the instance roster (EPD_REGISTRY_STORE=jetstream), read at scrape time. */
@Injectable()
export class RoutingMetrics extends OwnedMetrics {
  constructor(router: OwnerRouter, roster: InstanceRoster) {
    super();
    const last = { local: 0, forwarded: 0, toRank: 0, ownerGone: 0 };
    const outcomes = {
      local: 'local',
      forwarded: 'forwarded',
      toRank: 'dp_rank',
      ownerGone: 'owner_gone',
    } as const;
    this.own(
      new Counter({
        name: 'epd_owner_routing_total',
        help: 'Per-req_id calls by where they were answered: here (local), by the owner instance (forwarded), by the DP worker that owns it (dp_rank), or refused because the owner is gone (owner_gone)',
        labelNames: ['outcome'],
        collect() {
          const now = router.stats;
          for (const key of Object.keys(outcomes) as (keyof typeof outcomes)[]) {
            if (now[key] > last[key]) this.inc({ outcome: outcomes[key] }, now[key] - last[key]);
            last[key] = now[key];
          }
        },
      }),
    );
    this.own(
      new Gauge({
        name: 'epd_instances_alive',
        help: 'Instances in the roster with a heartbeat in the last three beats (this one included)',
        collect() {
          this.set(roster.enabled ? roster.list().filter((i) => i.alive).length : 1);
        },
      }),
    );
  }
}
