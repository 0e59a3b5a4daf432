import { Injectable } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { OwnedMetrics } from '../metrics/owned-metrics';
import { EmbeddingTransport } from '../transfer/embedding-transport';
import { DeliveryService } from './delivery.service';

/** The data plane: deliveries by outcome, their latency to the ack, bytes, open connections. */
@Injectable()
export class DeliveryMetrics extends OwnedMetrics {
  constructor(delivery: DeliveryService, transport: EmbeddingTransport, config: AppConfig) {
    super();
    const stats = delivery.sendStats;
    this.ownTotals('epd_encoder_sends_total', () => ({ acked: stats.acked, failed: stats.failed }));
    this.ownTotals('epd_encoder_sent_bytes_total', () => ({ bytes: stats.bytes }));
    this.ownTotals('epd_encoder_send_callers_gone_total', () => ({ callers: stats.callersGone }));
    this.gauge('epd_encoder_transfer_connections', () => transport.openConnections);
    this.gauge('epd_encoder_send_callers', () => stats.callersWaiting);
    const histogram = this.histogram('epd_encoder_send_seconds');
    const backend = { backend: config.transfer.backend };
    histogram.zero(backend);
    const seconds = histogram.labels(backend);
    delivery.observeSends((_outcome, s) => seconds.observe(s));
  }
}
