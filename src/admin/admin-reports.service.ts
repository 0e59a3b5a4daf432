import { Injectable, Optional, type OnModuleInit } from '@nestjs/common';
import { Clock } from '../common/clock';
import { EncodeAdmission } from '../encoder/pipeline/encode-admission.service';
import { ReqStateStore } from '../requests/req-state.store';
import { ParentLink } from '../transport/parent-link';
import { requestsView, type RequestsView } from './request-views';
import { EncoderBackend } from '../encoder/backend/encoder-backend';
import type { IpcTopic } from '../transport/ipc-topics';

/** A DP worker's request list, for its supervisor's GET /admin/requests. */
@Injectable()
export class AdminReports implements OnModuleInit {
  constructor(
    private readonly link: ParentLink,
    private readonly states: ReqStateStore,
    private readonly clock: Clock,
    @Optional() private readonly admission?: EncodeAdmission,
    @Optional() private readonly backend?: EncoderBackend,
  ) {}

  onModuleInit(): void {
    this.link.handle('requests', () =>
      requestsView(
        this.states,
        this.clock,
        this.admission?.pendingRequests ?? 0,
        this.backend?.stagingSlab,
      ),
    );
  }
}

declare module '../transport/ipc-topics' {
  interface IpcTopics {
    /** Supervisor → worker: its requests, for the supervisor's GET /admin/requests. */
    requests: IpcTopic<void, RequestsView>;
  }
}
