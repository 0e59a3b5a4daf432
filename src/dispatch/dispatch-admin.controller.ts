import { Controller, Delete, Get, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { AdminTokenGuard } from '../common/auth/admin-token.guard';
import { AppConfig } from '../config/app-config';
import { preprocessingView, visionModelsOf } from '../config/model-dir';
import { DpDispatcher } from './dp-dispatcher.service';
import type { ThreadPlan } from './thread-plan';
import type { RankMissing } from '../routing/local-ranks';
import { WorkerSupervisor, type WorkerView } from './worker-supervisor.service';

/** The worker processes: pid, liveness, pending calls, staged bytes, restarts, last exit code. */
@ApiTags('admin')
@ApiBearerAuth()
@UseGuards(AdminTokenGuard)
@Controller('admin')
export class DispatchAdminController {
  constructor(
    private readonly supervisor: WorkerSupervisor,
    private readonly dispatcher: DpDispatcher,
    private readonly config: AppConfig,
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

  /**
   * Each rank's batching scheduler counters (GET /admin/encoder of a single process), and
   * the vision models every rank serves (the default first), as requests choose them;
   * `missing` names each rank left out, and why.
   */
  @Get('encoder')
  async encoder(): Promise<{
    models: {
      name: string;
      family: string;
      patch_size: number;
      min_pixels: number;
      max_pixels: number;
    }[];
    ranks: { dp_rank: number; stats: unknown }[];
    missing: RankMissing[];
  }> {
    const { answers, missing } = await this.supervisor.ask('scheduler');
    const models = visionModelsOf(this.config.encoder).map(preprocessingView);
    return {
      models,
      ranks: answers.map((a) => ({ dp_rank: a.rank, stats: a.value })),
      missing,
    };
  }

  /**
   * Each rank's embedding cache (GET /admin/cache of a single process), and the claims
   * this supervisor keeps for its ranks' single flight (memory store; with JetStream the
   * bucket keeps them).
   */
  @Get('cache')
  async cache(): Promise<{
    claims_held?: number;
    ranks: { dp_rank: number; cache: unknown }[];
    missing: RankMissing[];
  }> {
    const { answers, missing } = await this.supervisor.ask('cache');
    return {
      ...(this.supervisor.claims ? { claims_held: this.supervisor.claims.size } : {}),
      ranks: answers.map((a) => ({ dp_rank: a.rank, cache: a.value })),
      missing,
    };
  }

  /** Purges every rank's cache; `missing` names the ranks that were not purged, and why. */
  @Delete('cache')
  async purgeCache(): Promise<{
    ranks: { dp_rank: number; purged: number }[];
    missing: RankMissing[];
  }> {
    const { answers, missing } = await this.supervisor.ask('cache_purge');
    return {
      ranks: answers.map((a) => ({ dp_rank: a.rank, purged: a.value.purged })),
      missing,
    };
  }
}
