import { Body, Controller, Get, HttpCode, Post, UseGuards } from '@nestjs/common';
import { Ctx, MessagePattern, NatsContext, Payload } from '@nestjs/microservices';
import { ApiBearerAuth, ApiBody, ApiTags } from '@nestjs/swagger';
import { AdminTokenGuard } from '../common/auth/admin-token.guard';
import { Deadlines } from '../common/deadline';
import { ApiReplies, openApiSchema } from '../common/openapi/zod-openapi';
import { AppConfig } from '../config/app-config';
import { EncodeRequestPipe } from '../encoder/pipeline/encode-request.pipe';
import { encodeRequestSchema, type EncodeRequest } from '../encoder/pipeline/encode-request.schema';
import { encodeResponseSchema, type EncodeResponse } from '../encoder/pipeline/encode-response';
import type { ProbeResult } from '../encoder/pipeline/encoder-probe.service';
import { DpType } from '../transport/subjects';
import { DpDispatcher, mergeRankAnswers } from './dp-dispatcher.service';
import { WorkerSupervisor, type ThreadPlan, type WorkerView } from './worker-supervisor.service';

/** The health probe of every rank: one line each, and the slowest latency. */
export interface DpProbeResult {
  ok: true;
  latency_ms: number;
  source: 'dp';
  msg: string;
}

/**
 * The DP supervisor's own routes (EPD_DP_SIZE > 1): `encode` dispatched to a worker, and
 * `health_encode` broadcast to every rank, answered with one `dp_rank=N: …` line per rank
 * and the worst rank's status. Over HTTP and NATS alike, as the single-process encoder
 * controller answers them. (Profiles: ProfilingController on DpProfileControl.)
 */
@ApiTags('encoder')
@Controller()
export class DispatchController {
  constructor(
    private readonly dispatcher: DpDispatcher,
    private readonly supervisor: WorkerSupervisor,
    private readonly deadlines: Deadlines,
    private readonly config: AppConfig,
  ) {}

  @Post('encode')
  @HttpCode(200)
  @ApiBody({ schema: openApiSchema(encodeRequestSchema) })
  @ApiReplies(encodeResponseSchema, 400, 409, 413, 500, 503, 504, 507)
  encodeHttp(
    @Body() raw: object,
    @Body(EncodeRequestPipe) req: EncodeRequest,
  ): Promise<EncodeResponse> {
    return this.dispatcher.encode(raw, req, this.deadlines.of(req));
  }

  @MessagePattern(DpType.Encode)
  encode(
    @Payload() raw: object,
    @Payload(EncodeRequestPipe) req: EncodeRequest,
    @Ctx() ctx: NatsContext,
  ): Promise<EncodeResponse> {
    return this.dispatcher.encode(raw, req, this.deadlines.of(req, ctx));
  }

  @Get('health_generate')
  healthGenerate(): Promise<DpProbeResult> {
    return this.probe();
  }

  @MessagePattern(DpType.HealthEncode)
  health(): Promise<DpProbeResult> {
    return this.probe();
  }

  private async probe(): Promise<DpProbeResult> {
    const answers = await this.dispatcher.broadcast<ProbeResult>(
      DpType.HealthEncode,
      {},
      this.config.encoder.probeTimeoutMs,
    );
    const msg = mergeRankAnswers(answers, (p) => `ok (${p.source}, ${p.latency_ms} ms)`);
    const latency = Math.max(...answers.map((a) => a.value?.latency_ms ?? 0));
    return { ok: true, latency_ms: latency, source: 'dp', msg };
  }
}

/** The worker processes: pid, liveness, pending calls, staged bytes, restarts, last exit code. */
@ApiTags('admin')
@ApiBearerAuth()
@UseGuards(AdminTokenGuard)
@Controller('admin')
export class DispatchAdminController {
  constructor(
    private readonly supervisor: WorkerSupervisor,
    private readonly dispatcher: DpDispatcher,
  ) {}

  @Get('workers')
  async workers(): Promise<{
    dp_size: number;
    alive: number;
    inflight_encodes: number;
    threads: ThreadPlan;
    workers: WorkerView[];
  }> {
    return {
      dp_size: this.supervisor.ranks.length,
      alive: this.supervisor.aliveCount,
      inflight_encodes: this.dispatcher.inflightCount,
      threads: this.supervisor.plan,
      workers: await this.supervisor.views(),
    };
  }

  /** Each rank's batching scheduler counters (GET /admin/encoder of a single process). */
  @Get('encoder')
  async encoder(): Promise<{ ranks: { dp_rank: number; stats: unknown }[] }> {
    const answers = await this.supervisor.gather<unknown>('scheduler');
    return { ranks: answers.map((a) => ({ dp_rank: a.rank, stats: a.value })) };
  }
}
