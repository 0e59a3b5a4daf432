import { Module, type DynamicModule, type Type } from '@nestjs/common';
import { RoutingModule } from '../routing/routing.module';
import { ScalingController } from './scaling.controller';
import { ScalingMetrics } from './scaling.metrics';
import { ScalingService } from './scaling.service';

/**
 * The autoscaling signal (docs/scaling.md, "Autoscaling"), in every instance: one process,
 * or a DP supervisor (its workers' load summed). `encoderSide` provides the LoadSource.
 */
@Module({})
export class ScalingModule {
  static for(encoderSide: Type): DynamicModule {
    return {
      module: ScalingModule,
      imports: [encoderSide, RoutingModule],
      controllers: [ScalingController],
      providers: [ScalingService, ScalingMetrics],
    };
  }
}
