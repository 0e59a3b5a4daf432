import { Controller } from '@nestjs/common';
import { Ctx, MessagePattern, NatsContext, Payload } from '@nestjs/microservices';
import { Deadlines } from '../common/deadline';
import { ZodPipe } from '../common/validation/zod.pipe';
import { reqIdOnlySchema, type ReqIdRequest } from '../meta-registry/meta.schema';
import { OwnerRouter, routeOptions } from '../routing/owner-router.service';
import { DpType } from '../transport/subjects';
import { ReqStateStore } from './req-state.store';
import { RequestLifecycle } from './request-lifecycle.service';

/** NATS `release` (the admin route `POST /admin/requests/:req_id/release` is the same path). */
@Controller()
export class RequestsController {
  constructor(
    private readonly lifecycle: RequestLifecycle,
    private readonly states: ReqStateStore,
    private readonly router: OwnerRouter,
    private readonly deadlines: Deadlines,
  ) {}

  /**
   * Idempotent: frees the staged embedding, defers while encoding, or leaves a tombstone.
   * With a shared store, a release for an embedding staged elsewhere goes to its owner;
   * one for a req_id with no metadata anywhere leaves its tombstone here, at once.
   */
  @MessagePattern(DpType.Release)
  release(
    @Payload(new ZodPipe(reqIdOnlySchema, 'release request')) req: ReqIdRequest,
    @Ctx() ctx: NatsContext,
  ): Promise<null> {
    return this.router.route(
      DpType.Release,
      req.req_id,
      req,
      this.deadlines.of({}, ctx),
      async () => {
        await this.lifecycle.release(req.req_id);
        return null;
      },
      routeOptions(this.states, req.req_id, ctx),
    );
  }
}
