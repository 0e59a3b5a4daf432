import { Injectable } from '@nestjs/common';
import { InstanceRoster } from '../routing/instance-roster.service';
import { OwnerRouter } from '../routing/owner-router.service';
import { OwnedMetrics } from './owned-metrics';
import { BucketKeeper } from '../jetstream/bucket-keeper';

/**
 * Owner routing, the instance roster and the shared buckets (EPD_REGISTRY_STORE=jetstream),
 * read at scrape time.
 */
@Injectable()
export class RoutingMetrics extends OwnedMetrics {
  constructor(router: OwnerRouter, roster: InstanceRoster, buckets: BucketKeeper) {
    super();
    this.ownTotals('epd_encoder_buckets_recreated_total', () => buckets.view().recreated);
    this.ownTotals('epd_encoder_owner_routing_total', () => {
      const s = router.stats;
      return {
        local: s.local,
        forwarded: s.forwarded,
        dp_rank: s.toRank,
        from_store: s.fromStore,
        owner_gone: s.ownerGone,
        owner_unreachable: s.unreachable,
        resent: s.resent,
        probes: s.probes,
      };
    });
    this.gauge('epd_encoder_instances_alive', () =>
      roster.enabled ? roster.list().filter((i) => i.alive).length : 1,
    );
  }
}
