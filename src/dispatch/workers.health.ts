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
    // Live workers that are not ready say why (a model that does not load), not "dead".
    const notReady: Record<string, Record<string, string>> = {};
    for (const r of this.supervisor.ranks) {
      const why = this.supervisor.notReady(r);
      if (why) notReady[`rank ${r.rank}`] = why;
    }
    const more = Object.keys(notReady).length > 0 ? { not_ready: notReady } : {};
    return alive > 0
      ? { up: true, data: { ...data, ...more } }
      : { up: false, data: { ...data, ...more, error: this.noneAlive(notReady) } };
  }

  private noneAlive(notReady: Record<string, Record<string, string>>): string {
    const n = Object.keys(notReady).length;
    if (n === 0) return Errors.allWorkersDead().message;
    return `No encoder DP worker is ready: ${n} running but not ready (not_ready says why), ${this.supervisor.ranks.length - n} not running.`;
  }
}
