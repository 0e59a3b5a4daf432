import { Injectable } from '@nestjs/common';
import { OwnedMetrics } from '../metrics/owned-metrics';
import { ScalingService } from './scaling.service';

/** The autoscaling signal and its inputs, as gauges read at scrape time. */
@Injectable()
export class ScalingMetrics extends OwnedMetrics {
  constructor(scaling: ScalingService) {
    super();
    const c = () => scaling.current().cluster;
    this.gauge('epd_encoder_desired_replicas', () => scaling.current().desired_replicas);
    this.gauge('epd_encoder_cluster_instances', () => c().instances);
    this.gauge('epd_encoder_cluster_arrival_rate', () => c().arrival_rate);
    this.gauge('epd_encoder_cluster_service_rate', () => c().service_rate);
    this.gauge('epd_encoder_cluster_queue_depth', () => c().queue_depth);
    this.gauge('epd_encoder_cluster_oldest_queued_seconds', () => c().oldest_queued_ms / 1000);
    this.gauge('epd_encoder_cluster_utilization', () => c().utilization);
  }
}
