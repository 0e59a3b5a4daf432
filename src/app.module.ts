import { Module } from '@nestjs/common';
import { AdminModule } from './admin/admin.module';
import { ErrorsModule } from './common/errors/errors.module';
import { ConfigModule } from './config/config.module';
import { EncoderModule } from './encoder/encoder.module';
import { HealthModule } from './health/health.module';
import { LoggingModule } from './logging/logging.module';
import { MetaRegistryModule } from './meta-registry/meta-registry.module';
import { MetricsModule } from './metrics/metrics.module';
import { TransportModule } from './transport/transport.module';

@Module({
  imports: [
    ConfigModule,
    LoggingModule,
    ErrorsModule,
    MetaRegistryModule,
    TransportModule,
    EncoderModule,
    HealthModule,
    AdminModule,
    MetricsModule,
  ],
})
export class AppModule {}
