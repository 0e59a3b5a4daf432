import { Injectable } from '@nestjs/common';
import { EpdNatsServer } from '../transport/epd-nats.server';
import { OwnedMetrics } from './owned-metrics';

/** The NATS calls' queue in this process and what it shed (EPD_OVERLOAD_QUEUE_MS), read at scrape time. */
@Injectable()
export class TransportMetrics extends OwnedMetrics {
  constructor(server: EpdNatsServer) {
    super();
    const gate = server.gate;
    this.ownTotals('epd_encoder_nats_shed_total', () => gate.stats.shed);
    this.gauge('epd_encoder_nats_queue_depth', () => gate.stats.queued);
    this.gauge('epd_encoder_nats_queue_oldest_seconds', () => gate.stats.oldestMs / 1000);
    this.gauge('epd_encoder_nats_shedding', () => (gate.stats.shedding ? 1 : 0));
    this.ownTotals('epd_encoder_nats_shedding_spells_total', () => ({
      all: gate.stats.sheddingSpells,
    }));
    const membership = server.membership;
    this.ownTotals('epd_encoder_nats_step_outs_total', () => ({
      all: membership.stats.stepOuts,
    }));
    this.ownTotals('epd_encoder_nats_step_outs_refused_total', () => ({
      all: membership.stats.stayedIn,
    }));
    this.ownTotals('epd_encoder_nats_out_of_group_seconds_total', () => ({
      all: membership.stats.outMs / 1000,
    }));
    this.gauge('epd_encoder_nats_out_of_group', () => (membership.stats.out ? 1 : 0));
    const calls = server.calls;
    this.ownTotals('epd_encoder_nats_repeated_calls_total', () => {
      const { joined, replayed, untracked, unknown } = calls.stats;
      return { joined, replayed, untracked, unknown };
    });
    this.gauge('epd_encoder_nats_calls_tracked', () => calls.stats.tracked);
  }
}
