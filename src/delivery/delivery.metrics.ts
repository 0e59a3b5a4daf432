import { Injectable } from '@nestjs/common';
import { LifecycleEvents } from '../common/lifecycle-events';
import { AppConfig } from '../config/app-config';
import { OwnedMetrics } from '../metrics/owned-metrics';
import { EmbeddingTransport } from '../transfer/embedding-transport';
import { DeliveryService } from './delivery.service';
import { DeliveryWire } from './delivery-wire';

/** The data plane: deliveries by outcome, their latency to the ack, bytes, open connections. */
@Injectable()
export class DeliveryMetrics extends OwnedMetrics {
  constructor(
    delivery: DeliveryService,
    wire: DeliveryWire,
    transport: EmbeddingTransport,
    config: AppConfig,
    events: LifecycleEvents,
  ) {
    super();
    const stats = wire.stats;
    const callers = delivery.callerStats;
    this.ownTotals('epd_encoder_sends_total', () => ({ acked: stats.acked, failed: stats.failed }));
    this.ownTotals('epd_encoder_sent_bytes_total', () => ({ bytes: stats.bytes }));
    this.ownTotals('epd_encoder_send_callers_gone_total', () => ({ callers: callers.callersGone }));
    this.gauge('epd_encoder_transfer_connections', () => transport.openConnections);
    this.gauge('epd_encoder_send_callers', () => callers.callersWaiting);
    const histogram = this.histogram('epd_encoder_send_seconds');
    const backend = { backend: config.transfer.backend };
    histogram.zero(backend);
    const seconds = histogram.labels(backend);
    events.on('send.completed', (_outcome, s) => seconds.observe(s));
  }
}
