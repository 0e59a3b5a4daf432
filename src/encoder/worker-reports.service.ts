import { Injectable, type OnModuleInit } from '@nestjs/common';
import { ReqStateStore } from '../requests/req-state.store';
import type { IpcTopic } from '../transport/ipc-topics';
import { ParentLink } from '../transport/parent-link';
import { EncodeAdmission } from './pipeline/encode-admission.service';
import type { WorkBudgetStats } from './pipeline/work-budget';
import type { LoadSnapshot } from '../common/load';
import { EncodeScheduler, type SchedulerStats } from './scheduler/encode-scheduler.service';
import type { RequestsView } from '../admin/request-views';
import { LocalRequestsReport } from './local-requests-report';

/** GET /admin/encoder of one process: its scheduler's counters and its working memory. */
export type EncoderStats = SchedulerStats & { memory: WorkBudgetStats };

export function encoderStats(scheduler: EncodeScheduler, admission: EncodeAdmission): EncoderStats {
  return { ...scheduler.stats(), memory: admission.work.stats() };
}

/** What a worker reports about itself over IPC (`stats`). */
export interface WorkerStats {
  pending: number;
  staged_bytes: number;
  /** For the autoscaling signal, which the supervisor sums over its workers. */
  load: LoadSnapshot;
}

/**
 * What a DP worker tells its supervisor over IPC, for GET /admin/workers, /admin/encoder
 * and /admin/requests.
 */
@Injectable()
export class WorkerReports implements OnModuleInit {
  constructor(
    private readonly link: ParentLink,
    private readonly admission: EncodeAdmission,
    private readonly states: ReqStateStore,
    private readonly scheduler: EncodeScheduler,
    private readonly requests: LocalRequestsReport,
  ) {}

  onModuleInit(): void {
    this.link.handle('stats', () => ({
      pending: this.admission.pendingRequests,
      staged_bytes: this.states.stats().usedBytes,
      load: this.admission.load.snapshot(),
    }));
    this.link.handle('scheduler', () => encoderStats(this.scheduler, this.admission));
    this.link.handle('requests', () => this.requests.local());
  }
}

declare module '../transport/ipc-topics' {
  interface IpcTopics {
    /** Supervisor → worker: pending requests and staged bytes, for GET /admin/workers. */
    stats: IpcTopic<void, WorkerStats>;
    /** Supervisor → worker: its scheduler's counters and working memory, for GET /admin/encoder. */
    scheduler: IpcTopic<void, EncoderStats>;
    /** Supervisor → worker: its requests, for the supervisor's GET /admin/requests. */
    requests: IpcTopic<void, RequestsView>;
  }
}
