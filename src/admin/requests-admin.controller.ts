import { Controller, Get, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { Clock } from '../common/clock';
import { ZodPipe } from '../common/validation/zod.pipe';
import {
  DeliveryService,
  destinationViews,
  type DestinationView,
  type SendStatus,
} from '../delivery/delivery.service';
import { EncodeAdmission } from '../encoder/pipeline/encode-admission.service';
import { RequestLifecycle } from '../requests/request-lifecycle.service';
import {
  ReqStateStore,
  type ReleaseOutcome,
  type ReqPhase,
  type StagingStats,
} from '../requests/req-state.store';
import { reqIdSchema } from '../meta-registry/meta.schema';
import { AdminTokenGuard } from '../common/auth/admin-token.guard';

interface RequestView {
  req_id: string;
  modality: string;
  part_idx: number;
  state: ReqPhase;
  bytes: number;
  embedding_len: number | null;
  embedding_dim: number | null;
  dtype: string | null;
  age_ms: number;
  idle_ms: number;
  receive_count: number | null;
  acked: number;
  destinations: DestinationView[];
}

@ApiTags('admin')
@ApiBearerAuth()
@UseGuards(AdminTokenGuard)
/** Requests with state on this worker: list, one request's delivery status, release. */
@Controller('admin')
export class RequestsAdminController {
  constructor(
    private readonly states: ReqStateStore,
    private readonly admission: EncodeAdmission,
    private readonly clock: Clock,
    private readonly delivery: DeliveryService,
    private readonly lifecycle: RequestLifecycle,
  ) {}

  /** Requests with state on this worker: encoding or staged, with bytes and ages. */
  @Get('requests')
  requests(): { staging: StagingStats; pending: number; requests: RequestView[] } {
    const now = this.clock.now();
    return {
      staging: this.states.stats(),
      pending: this.admission.pendingRequests,
      requests: this.states.list().map((s) => ({
        req_id: s.reqId,
        modality: s.modality,
        part_idx: s.partIdx,
        state: s.phase,
        bytes: s.heldBytes,
        embedding_len: s.embedding?.tokens ?? null,
        embedding_dim: s.embedding?.dim ?? null,
        dtype: s.embedding?.dtype ?? null,
        age_ms: now - s.createdAt,
        idle_ms: now - s.lastUsedAt,
        receive_count: s.receiveCount ?? null,
        acked: s.ackedCount,
        destinations: destinationViews(s),
      })),
    };
  }

  /** One request's delivery status: receive_count, and each destination's outcome and error. */
  @Get('requests/:req_id')
  status(@Param('req_id', new ZodPipe(reqIdSchema, 'req_id')) reqId: string): SendStatus {
    return this.delivery.status(reqId);
  }

  /** The same idempotent release as NATS `release`: frees now, defers while encoding, or tombstones. */
  @Post('requests/:req_id/release')
  @HttpCode(200)
  async release(
    @Param('req_id', new ZodPipe(reqIdSchema, 'req_id')) reqId: string,
  ): Promise<{ req_id: string; outcome: ReleaseOutcome }> {
    return { req_id: reqId, outcome: await this.lifecycle.release(reqId) };
  }
}
