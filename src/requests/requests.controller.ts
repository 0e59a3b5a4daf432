import { AwaitsReadiness } from '../common/readiness';
import { NatsOperation } from '../common/openapi/nats-operation';
import { Controller, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import { MessagePattern, Payload } from '@nestjs/microservices';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { AdminTokenGuard } from '../common/auth/admin-token.guard';
import { ZodPipe } from '../common/validation/zod.pipe';
import { reqIdOnlySchema, reqIdSchema, type ReqIdRequest } from '../meta-registry/meta.schema';
import { OwnerRouted } from '../routing/owner-routed';
import { DpType } from '../transport/subjects';
import type { ReleaseOutcome } from './req-state.store';
import { RequestLifecycle } from './request-lifecycle.service';

/**
 * `release`, over NATS and as `POST /admin/requests/:req_id/release`: idempotent, it frees
 * the staged embedding, defers while encoding, or leaves a tombstone. With a shared store,
 * a release for an embedding staged elsewhere goes to its owner; one for a req_id with no
 * metadata anywhere leaves its tombstone here, at once.
 */
@AwaitsReadiness()
@Controller()
export class RequestsController {
  constructor(private readonly lifecycle: RequestLifecycle) {}

  @MessagePattern(DpType.Release)
  @NatsOperation({
    what: 'Free the staged embedding and its metadata (idempotent; deferred while an encode or send runs; a tombstone for an unknown req_id).',
    request: reqIdOnlySchema,
    reply: '`null`',
  })
  @OwnerRouted(DpType.Release)
  async release(
    @Payload(new ZodPipe(reqIdOnlySchema, 'release request')) req: ReqIdRequest,
  ): Promise<null> {
    await this.lifecycle.release(req.req_id);
    return null;
  }

  /** The HTTP twin of `release`; a release its owner answered reports `routed`. */
  @Post('admin/requests/:req_id/release')
  @HttpCode(200)
  @ApiTags('admin')
  @ApiBearerAuth()
  @UseGuards(AdminTokenGuard)
  @OwnerRouted(DpType.Release, { forwarded: (reqId) => ({ req_id: reqId, outcome: 'routed' }) })
  async releaseHttp(
    @Param('req_id', new ZodPipe(reqIdSchema, 'req_id')) reqId: string,
  ): Promise<{ req_id: string; outcome: ReleaseOutcome | 'routed' }> {
    return { req_id: reqId, outcome: await this.lifecycle.release(reqId) };
  }
}
