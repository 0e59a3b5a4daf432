import { Module } from '@nestjs/common';
import { PrometheusModule } from '@willsoto/nestjs-prometheus';
import { MetaRegistryModule } from '../meta-registry/meta-registry.module';
import { RoutingModule } from '../routing/routing.module';
import { RegistryMetrics } from './registry.metrics';
import { RoutingMetrics } from './routing.metrics';

@Module({
  imports: [
    PrometheusModule.register({ path: '/metrics', defaultMetrics: { enabled: true } }),
    MetaRegistryModule,
    RoutingModule,
  ],
  providers: [RegistryMetrics, RoutingMetrics],
})
export class MetricsModule {}
