import { Module, type DynamicModule, type Type } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { MetaRegistryModule } from '../meta-registry/meta-registry.module';
import { TransportModule } from '../transport/transport.module';
import { EventLoopMonitor } from './event-loop.monitor';
import { HealthController } from './health.controller';
import { HealthIndicators } from './health.indicators';

/** Terminus health over the process's own state; `encoderSide` provides EncoderHealth. */
@Module({})
export class HealthModule {
  static for(encoderSide: Type): DynamicModule {
    return {
      module: HealthModule,
      imports: [
        TerminusModule.forRoot({ logger: false }),
        TransportModule,
        MetaRegistryModule,
        encoderSide,
      ],
      controllers: [HealthController],
      providers: [EventLoopMonitor, HealthIndicators],
    };
  }
}
