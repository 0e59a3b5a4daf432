import { Controller, Get, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { AdminTokenGuard } from '../common/auth/admin-token.guard';
import { DpDispatcher } from './dp-dispatcher.service';
import { WorkerSupervisor, type ThreadPlan, type WorkerView } from './worker-supervisor.service';

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
