import { Injectable, type OnModuleInit } from '@nestjs/common';
import { ReqStateStore } from '../requests/req-state.store';
import { ParentLink } from '../transport/parent-link';
import { DpType } from '../transport/subjects';
import { EncodeAdmission } from './pipeline/encode-admission.service';
import { EncodeRequestPipe } from './pipeline/encode-request.pipe';
import { EncoderService } from './pipeline/encoder.service';
import { EncodeScheduler } from './scheduler/encode-scheduler.service';

/**
 * What a DP worker answers its supervisor over IPC: its numbers for GET /admin/workers and
 * /admin/encoder, and the encodes too large for NATS (validated and run exactly as the
 * `encode` subject's are).
 */
@Injectable()
export class WorkerReports implements OnModuleInit {
  private readonly pipe = new EncodeRequestPipe();

  constructor(
    private readonly link: ParentLink,
    private readonly admission: EncodeAdmission,
    private readonly states: ReqStateStore,
    private readonly scheduler: EncodeScheduler,
    private readonly encoder: EncoderService,
  ) {}

  onModuleInit(): void {
    this.link.handle('stats', () => ({
      pending: this.admission.pendingRequests,
      staged_bytes: this.states.stats().usedBytes,
    }));
    this.link.handle('scheduler', () => this.scheduler.stats());
    this.link.handle(DpType.Encode, (payload) => {
      const { body, deadline } = payload as { body: unknown; deadline: number };
      return this.encoder.encode(this.pipe.transform(body), deadline);
    });
  }
}
