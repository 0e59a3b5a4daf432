import { Injectable } from '@nestjs/common';
import { Gauge } from 'prom-client';
import { EpdNatsServer } from '../transport/epd-nats.server';
import { OwnedMetrics } from './owned-metrics';

/** The NATS calls' queue in this process and what it shed (EPD_OVERLOAD_QUEUE_MS), read at scrape time. */
@Injectable()
export class TransportMetrics extends OwnedMetrics {
  constructor(server: EpdNatsServer) {
    super();
    const gate = server.gate;
    this.ownTotals(
      'epd_nats_shed_total',
      'NATS calls answered 503 overloaded at once because the queue ahead of them was longer than EPD_OVERLOAD_QUEUE_MS, by dp_type',
      'dp_type',
      () => gate.stats.shed,
    );
    this.own(
      new Gauge({
        name: 'epd_nats_queue_depth',
        help: 'NATS calls received and waiting for their handler',
        collect() {
          this.set(gate.stats.queued);
        },
      }),
    );
    this.own(
      new Gauge({
        name: 'epd_nats_queue_oldest_seconds',
        help: 'How long the oldest NATS call waiting for its handler has waited',
        collect() {
          this.set(gate.stats.oldestMs / 1000);
        },
      }),
    );
  }
}
