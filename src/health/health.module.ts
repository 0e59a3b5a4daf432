import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { EncoderModule } from '../encoder/encoder.module';
import { MetaRegistryModule } from '../meta-registry/meta-registry.module';
import { TransportModule } from '../transport/transport.module';
import { EventLoopMonitor } from './event-loop.monitor';
import { HealthController } from './health.controller';
import { HealthIndicators } from './health.indicators';

@Module({
  imports: [
    TerminusModule.forRoot({ logger: false }),
    TransportModule,
    MetaRegistryModule,
    EncoderModule,
  ],
  controllers: [HealthController],
  providers: [EventLoopMonitor, HealthIndicators],
})
export class HealthModule {}
