import { Injectable, type OnModuleInit } from '@nestjs/common';
import { ReqStateStore } from '../requests/req-state.store';
import { ParentLink } from '../transport/parent-link';
import { EncodeAdmission } from './pipeline/encode-admission.service';
import { EncodeScheduler, type SchedulerStats } from './scheduler/encode-scheduler.service';

/** What a worker reports about itself over IPC (`stats`). */
export interface WorkerStats {
  pending: number;
  staged_bytes: number;
}
import type { IpcTopic } from '../transport/ipc-topics';

/** What a DP worker tells its supervisor over IPC for GET /admin/workers and /admin/encoder. */
@Injectable()
export class WorkerReports implements OnModuleInit {
  constructor(
    private readonly link: ParentLink,
    private readonly admission: EncodeAdmission,
    private readonly states: ReqStateStore,
    private readonly scheduler: EncodeScheduler,
  ) {}

  onModuleInit(): void {
    this.link.handle('stats', () => ({
      pending: this.admission.pendingRequests,
      staged_bytes: this.states.stats().usedBytes,
    }));
    this.link.handle('scheduler', () => this.scheduler.stats());
  }
}

declare module '../transport/ipc-topics' {
  interface IpcTopics {
    /** Supervisor → worker: pending requests and staged bytes, for GET /admin/workers. */
    stats: IpcTopic<void, WorkerStats>;
    /** Supervisor → worker: its batching scheduler's counters, for GET /admin/encoder. */
    scheduler: IpcTopic<void, SchedulerStats>;
  }
}
