import { Module } from '@nestjs/common';
import { PrometheusModule } from '@willsoto/nestjs-prometheus';
import { MetaRegistryModule } from '../meta-registry/meta-registry.module';
import { RegistryMetrics } from './registry.metrics';

@Module({
  imports: [
    PrometheusModule.register({ path: '/metrics', defaultMetrics: { enabled: true } }),
    MetaRegistryModule,
  ],
  providers: [RegistryMetrics],
})
export class MetricsModule {}
