import { Module, type DynamicModule } from '@nestjs/common';
import { AdminModule } from './admin/admin.module';
import { CommonModule } from './common/common.module';
import { ErrorsModule } from './common/errors/errors.module';
import type { AppConfig } from './config/app-config';
import { ConfigModule } from './config/config.module';
import { EncoderModule } from './encoder/encoder.module';
import { HealthModule } from './health/health.module';
import { LoggingModule } from './logging/logging.module';
import { MetaRegistryModule } from './meta-registry/meta-registry.module';
import { DeliveryModule } from './delivery/delivery.module';
import { MetricsModule } from './metrics/metrics.module';
import { ProfilingModule } from './profiling/profiling.module';
import { RequestsModule } from './requests/requests.module';
import { SglangModule } from './sglang/sglang.module';
import { TransportModule } from './transport/transport.module';

const FEATURES = [
  CommonModule,
  LoggingModule,
  ErrorsModule,
  TransportModule,
  MetaRegistryModule,
  RequestsModule,
  DeliveryModule,
  ProfilingModule,
  EncoderModule,
  HealthModule,
  AdminModule,
  MetricsModule,
  SglangModule,
];

/** The whole service, on a config loaded once by whoever creates it (main.ts or a test). */
@Module({})
export class AppModule {
  static withConfig(config: AppConfig): DynamicModule {
    return { module: AppModule, imports: [ConfigModule.withConfig(config), ...FEATURES] };
  }
}
