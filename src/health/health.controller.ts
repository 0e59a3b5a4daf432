import { Controller, Get, Res, ServiceUnavailableException } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import {
  HealthCheck,
  HealthCheckService,
  HealthIndicatorService,
  type HealthCheckResult,
  type HealthIndicatorResult,
} from '@nestjs/terminus';
import { Readiness } from '../common/readiness';
import type { Response } from 'express';
import { HealthIndicators } from './health.indicators';
import { BucketKeeper } from '../jetstream/bucket-keeper';

@ApiTags('health')
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly indicators: HealthIndicators,
    private readonly indicator: HealthIndicatorService,
    private readonly readiness: Readiness,
    private readonly buckets: BucketKeeper,
  ) {}

  /** Liveness: the process answers HTTP. No dependency is consulted. */
  @Get('live')
  live(): { status: 'ok' } {
    return { status: 'ok' };
  }

  /**
   * What SGLang's /health means: this encoder can encode (the encoder probe, the registry
   * under its bounds, the event loop). SGLang's encoder bootstrap evicts an encoder whose
   * /health fails, and HTTP encode and metadata work without NATS, so NATS being down
   * does not fail it: its state is in the body (`details.nats`), and /health/ready fails.
   */
  @Get()
  @HealthCheck()
  async check(@Res({ passthrough: true }) res: Response): Promise<HealthCheckResult> {
    const [result, nats] = await Promise.all([
      this.run(res, [
        () => this.indicators.registryBounds(),
        () => this.indicators.eventLoop(),
        () => this.indicators.encoder(),
      ]),
      this.indicators.natsConnection(),
    ]);
    return { ...result, details: { ...result.details, ...nats } };
  }

  /**
   * Readiness for everything, NATS included: route traffic here only when 200. `serving`
   * turns up when the process joins its NATS subjects (Readiness), so the load balancer
   * and the queue group start sending calls at the same moment. Cheap: the models must be
   * loaded, but no forward runs (a real tower on CPU busy with requests would miss a
   * kubelet probe's timeout on every call, and the Service would empty); /health/deep adds
   * the probe encode.
   */
  @Get('ready')
  @HealthCheck()
  ready(@Res({ passthrough: true }) res: Response): Promise<HealthCheckResult> {
    return this.run(res, [...this.readyChecks(), () => this.indicators.encoderLoaded()]);
  }

  /**
   * Everything /health/ready checks, and a real probe encode (cached 5 s; while busy, a
   * forward completed within encoder.probeFreshMs stands for it), bounded by
   * encoder.probeTimeoutMs: for an operator or a synthetic check, not a kubelet probe.
   */
  @Get('deep')
  @HealthCheck()
  deep(@Res({ passthrough: true }) res: Response): Promise<HealthCheckResult> {
    return this.run(res, [...this.readyChecks(), () => this.indicators.encoder()]);
  }

  private readyChecks(): Parameters<HealthCheckService['check']>[0] {
    return [
      () => this.serving(),
      () => this.indicators.natsConnection(),
      () => this.indicators.registryBounds(),
      () => this.sharedBuckets(),
      () => this.indicators.eventLoop(),
    ];
  }

  /**
   * The shared buckets besides the registry's: down while one found deleted is not made
   * again yet (BucketKeeper); `recreated` counts how often each was.
   */
  private sharedBuckets(): HealthIndicatorResult {
    const check = this.indicator.check('buckets');
    const { missing, recreated, errors } = this.buckets.view();
    if (missing.length > 0) {
      return check.down({ missing, recreated, ...(errors ? { errors } : {}) });
    }
    return check.up({ recreated });
  }

  private serving(): HealthIndicatorResult {
    const check = this.indicator.check('serving');
    if (this.readiness.serving) return check.up();
    return check.down({ waiting_for: this.readiness.waitingFor });
  }

  /** 200 with the detail when every indicator is up; 503 with the same detail when not. */
  private async run(
    res: Response,
    checks: Parameters<HealthCheckService['check']>[0],
  ): Promise<HealthCheckResult> {
    try {
      return await this.health.check(checks);
    } catch (err) {
      if (!(err instanceof ServiceUnavailableException)) throw err;
      res.status(503);
      return err.getResponse() as HealthCheckResult;
    }
  }
}
