import { Injectable, Logger, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { LoadSource, sumLoads, type LoadSnapshot } from '../common/load';
import { AppConfig } from '../config/app-config';
import { WorkerSupervisor } from './worker-supervisor.service';

/**
 * A DP instance's load for the autoscaling signal: its workers' figures, gathered over IPC
 * once a heartbeat and summed (the roster's heartbeat and the decision read the last sum).
 */
@Injectable()
export class DpLoad extends LoadSource implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('DpLoad');
  private last: LoadSnapshot = sumLoads([]);
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly config: AppConfig,
    private readonly supervisor: WorkerSupervisor,
  ) {
    super();
  }

  onModuleInit(): void {
    this.timer = setInterval(() => void this.refresh(), this.config.instance.heartbeatMs);
    this.timer.unref();
  }

  onModuleDestroy(): void {
    clearInterval(this.timer);
  }

  snapshot(): LoadSnapshot {
    return this.last;
  }

  private async refresh(): Promise<void> {
    try {
      const answers = await this.supervisor.gather('stats');
      this.last = sumLoads(answers.map((a) => a.value.load));
    } catch (err) {
      this.logger.debug({ err: (err as Error).message }, "workers' load not gathered");
    }
  }
}
