import { Controller, Get, Optional, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { Clock } from '../common/clock';
import { EncodeAdmission } from '../encoder/pipeline/encode-admission.service';
import { ReqStateStore } from '../requests/req-state.store';
import { AdminTokenGuard } from '../common/auth/admin-token.guard';
import { LocalRanks } from '../routing/local-ranks';
import { requestsView, type RequestsView } from './request-views';
import { EncoderBackend } from '../encoder/backend/encoder-backend';

@ApiTags('admin')
@ApiBearerAuth()
@UseGuards(AdminTokenGuard)
/**
 * Requests with state on this worker, listed. One request's status and its release sit
 * beside their NATS twins (DeliveryController, RequestsController).
 */
@Controller('admin')
export class RequestsAdminController {
  constructor(
    private readonly states: ReqStateStore,
    private readonly clock: Clock,
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
      const answers = await this.ranks.gather('requests');
      return { ranks: answers.map((a) => ({ dp_rank: a.rank, ...a.value })) };
    }
    return requestsView(
      this.states,
      this.clock,
      this.admission?.pendingRequests ?? 0,
      this.backend?.stagingSlab,
    );
  }
}
