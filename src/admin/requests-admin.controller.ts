import { Controller, Get, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { AdminTokenGuard } from '../common/auth/admin-token.guard';
import type { RequestsView } from './request-views';
import { RequestsReport, type RanksRequestsView } from './requests-report';

@ApiTags('admin')
@ApiBearerAuth()
@UseGuards(AdminTokenGuard)
/**
 * Requests with state on this worker, listed. One request's status and its release sit
 * beside their NATS twins (DeliveryController, RequestsController).
 */
@Controller('admin')
export class RequestsAdminController {
  constructor(private readonly report: RequestsReport) {}

  /**
   * Requests with state on this worker: encoding or staged, with bytes and ages. A DP
   * supervisor holds none itself: it lists each rank's.
   */
  @Get('requests')
  requests(): Promise<RequestsView | RanksRequestsView> {
    return this.report.view();
  }
}
