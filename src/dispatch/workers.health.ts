import { Injectable } from '@nestjs/common';
import { Errors } from '../common/errors/error-catalogue';
import { EncoderHealth, type EncoderHealthReport } from '../health/encoder-health';
import { WorkerSupervisor } from './worker-supervisor.service';

/** A DP supervisor can encode while one worker is alive: degraded, but ready. */
@Injectable()
export class WorkersHealth extends EncoderHealth {
  constructor(private readonly supervisor: WorkerSupervisor) {
    super();
  }

  check(): Promise<EncoderHealthReport> {
    return Promise.resolve(this.loaded());
  }

  /** Already cheap: the supervisor's count of live workers (each loaded its models to start). */
  loaded(): EncoderHealthReport {
    const alive = this.supervisor.aliveCount;
    const total = this.supervisor.ranks.length;
    const data = { dp_alive: alive, dp_total: total, degraded: alive < total };
    return alive > 0
      ? { up: true, data }
      : { up: false, data: { ...data, error: Errors.allWorkersDead().message } };
  }
}
