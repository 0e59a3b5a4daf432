import { Controller, Get, HttpCode, Optional, Param, Post, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { Clock } from '../common/clock';
import { ZodPipe } from '../common/validation/zod.pipe';
import { DeliveryService, type SendStatus } from '../delivery/delivery.service';
import { EncodeAdmission } from '../encoder/pipeline/encode-admission.service';
import { RequestLifecycle } from '../requests/request-lifecycle.service';
import { ReqStateStore, type ReleaseOutcome } from '../requests/req-state.store';
import { reqIdSchema } from '../meta-registry/meta.schema';
import { AdminTokenGuard } from '../common/auth/admin-token.guard';
import { LocalRanks } from '../routing/local-ranks';
import { OwnerRouter, routeOptions } from '../routing/owner-router.service';
import { Deadlines } from '../common/deadline';
import { DpType } from '../transport/subjects';
import { requestsView, type RequestsView } from './request-views';
import { EncoderBackend } from '../encoder/backend/encoder-backend';

@ApiTags('admin')
@ApiBearerAuth()
@UseGuards(AdminTokenGuard)
/** Requests with state on this worker: list, one request's delivery status, release. */
@Controller('admin')
export class RequestsAdminController {
  constructor(
    private readonly states: ReqStateStore,
    private readonly clock: Clock,
    private readonly delivery: DeliveryService,
    private readonly lifecycle: RequestLifecycle,
    private readonly router: OwnerRouter,
    private readonly deadlines: Deadlines,
    @Optional() private readonly admission?: EncodeAdmission,
    @Optional() private readonly ranks?: LocalRanks,
    @Optional() private readonly backend?: EncoderBackend,
  ) {}

  /**
   * Requests with state on this worker: encoding or staged, with bytes and ages. A DP
   * supervisor holds none itself: it lists each rank's.
   */
  @Get('requests')
  async requests(): Promise<RequestsView | { ranks: ({ dp_rank: number } & RequestsView)[] }> {
    if (this.ranks) {
      const answers = await this.ranks.gather<RequestsView>('requests');
      return { ranks: answers.map((a) => ({ dp_rank: a.rank, ...a.value })) };
    }
    return requestsView(
      this.states,
      this.clock,
      this.admission?.pendingRequests ?? 0,
      this.backend?.stagingSlab,
    );
  }

  /**
   * One request's delivery status: receive_count, and each destination's outcome and error.
   * Answered by the process that holds the req_id (owner routing), as NATS `send_status` is.
   */
  @Get('requests/:req_id')
  status(@Param('req_id', new ZodPipe(reqIdSchema, 'req_id')) reqId: string): Promise<SendStatus> {
    return this.router.route(
      DpType.SendStatus,
      reqId,
      { req_id: reqId },
      this.deadlines.of({}),
      () => Promise.resolve(this.delivery.status(reqId)),
      routeOptions(this.states, reqId),
    );
  }

  /**
   * The same idempotent release as NATS `release`: frees now, defers while encoding, or
   * tombstones. A release the owner routing sent to another process reports `routed`.
   */
  @Post('requests/:req_id/release')
  @HttpCode(200)
  async release(
    @Param('req_id', new ZodPipe(reqIdSchema, 'req_id')) reqId: string,
  ): Promise<{ req_id: string; outcome: ReleaseOutcome | 'routed' }> {
    let outcome: ReleaseOutcome | 'routed' = 'routed';
    await this.router.route(
      DpType.Release,
      reqId,
      { req_id: reqId },
      this.deadlines.of({}),
      async () => {
        outcome = await this.lifecycle.release(reqId);
        return null;
      },
      routeOptions(this.states, reqId),
    );
    return { req_id: reqId, outcome };
  }
}
