import { Injectable, type OnModuleInit } from '@nestjs/common';
import type { IpcTopic } from '../transport/ipc-topics';
import { ParentLink } from '../transport/parent-link';
import type { RequestsView } from './request-views';
import { LocalRequestsReport } from './requests-report';

/** A DP worker's request list, for its supervisor's GET /admin/requests. */
@Injectable()
export class AdminReports implements OnModuleInit {
  constructor(
    private readonly link: ParentLink,
    private readonly report: LocalRequestsReport,
  ) {}

  onModuleInit(): void {
    this.link.handle('requests', () => this.report.local());
  }
}

declare module '../transport/ipc-topics' {
  interface IpcTopics {
    /** Supervisor → worker: its requests, for the supervisor's GET /admin/requests. */
    requests: IpcTopic<void, RequestsView>;
  }
}
