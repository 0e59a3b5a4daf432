import { Module } from '@nestjs/common';
import { AdminModule } from './admin/admin.module';
import { CommonModule } from './common/common.module';
import { ErrorsModule } from './common/errors/errors.module';
import { ConfigModule } from './config/config.module';
import { EncoderModule } from './encoder/encoder.module';
import { HealthModule } from './health/health.module';
import { LoggingModule } from './logging/logging.module';
import { MetaRegistryModule } from './meta-registry/meta-registry.module';
import { DeliveryModule } from './delivery/delivery.module';
import { MetricsModule } from './metrics/metrics.module';
import { ProfilingModule } from './profiling/profiling.module';
import { RequestsModule } from './requests/requests.module';
import { TransportModule } from './transport/transport.module';

@Module({
  imports: [
    ConfigModule,
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
  ],
})
export class AppModule {}
