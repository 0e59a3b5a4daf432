import { Controller, Get, UseGuards } from '@nestjs/common';
import { MessagePattern } from '@nestjs/microservices';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { z } from 'zod';
import { AdminTokenGuard } from '../common/auth/admin-token.guard';
import { NatsOperation } from '../common/openapi/nats-operation';
import { DpType } from '../transport/subjects';
import { ScalingService, type ScalingView } from './scaling.service';

/** The autoscaling signal: GET /admin/scaling and NATS `stats`, the same numbers. */
@ApiTags('admin')
@ApiBearerAuth()
@Controller()
export class ScalingController {
  constructor(private readonly scaling: ScalingService) {}

  @Get('admin/scaling')
  @UseGuards(AdminTokenGuard)
  scalingHttp(): ScalingView {
    return this.scaling.current();
  }

  @MessagePattern(DpType.Stats)
  @NatsOperation({
    what: "The autoscaling signal: desired encoders for the whole cluster, the cluster-wide inputs and each live instance's load, with a one-line reason (the same as `GET /admin/scaling`).",
    request: z.object({}),
    reply:
      '`{desired_replicas, raw_replicas, reason, cluster: {instances, arrival_rate, service_rate, queue_depth, oldest_queued_ms, utilization}, instances, self, policy, computed_at}`',
  })
  stats(): ScalingView {
    return this.scaling.current();
  }
}
