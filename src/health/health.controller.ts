import { Controller, Get, Res, ServiceUnavailableException } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { HealthCheck, HealthCheckService, type HealthCheckResult } from '@nestjs/terminus';
import type { Response } from 'express';
import { HealthIndicators } from './health.indicators';

@ApiTags('health')
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly indicators: HealthIndicators,
  ) {}

  /** Liveness: the process answers HTTP. No dependency is consulted. */
  @Get('live')
  live(): { status: 'ok' } {
    return { status: 'ok' };
  }

  @Get()
  @HealthCheck()
  check(@Res({ passthrough: true }) res: Response): Promise<HealthCheckResult> {
    return this.readiness(res);
  }

  @Get('ready')
  @HealthCheck()
  ready(@Res({ passthrough: true }) res: Response): Promise<HealthCheckResult> {
    return this.readiness(res);
  }

  /** 200 with the detail when every indicator is up; 503 with the same detail when not. */
  private async readiness(res: Response): Promise<HealthCheckResult> {
    try {
      return await this.health.check([
        () => this.indicators.natsConnection(),
        () => this.indicators.registryBounds(),
        () => this.indicators.eventLoop(),
        () => this.indicators.encoder(),
      ]);
    } catch (err) {
      if (!(err instanceof ServiceUnavailableException)) throw err;
      res.status(503);
      return err.getResponse() as HealthCheckResult;
    }
  }
}
