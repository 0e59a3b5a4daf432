import { Injectable } from '@nestjs/common';
import { Gauge } from 'prom-client';
import { InstanceRoster } from '../routing/instance-roster.service';
import { OwnerRouter } from '../routing/owner-router.service';
import { OwnedMetrics } from './owned-metrics';

/** Owner routing and the instance roster (EPD_REGISTRY_STORE=jetstream), read at scrape time. */
@Injectable()
export class RoutingMetrics extends OwnedMetrics {
  constructor(router: OwnerRouter, roster: InstanceRoster) {
    super();
    this.ownTotals(
      'epd_owner_routing_total',
      'Per-req_id calls by where they were answered: here (local), by the owner instance (forwarded), by the DP worker that owns it (dp_rank), or refused because the owner is gone (owner_gone)',
      'outcome',
      () => {
        const s = router.stats;
        return {
          local: s.local,
          forwarded: s.forwarded,
          dp_rank: s.toRank,
          owner_gone: s.ownerGone,
        };
      },
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
