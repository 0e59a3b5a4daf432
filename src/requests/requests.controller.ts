import { Controller } from '@nestjs/common';
import { MessagePattern, Payload } from '@nestjs/microservices';
import { ZodPipe } from '../common/validation/zod.pipe';
import { reqIdOnlySchema, type ReqIdRequest } from '../meta-registry/meta.schema';
import { DpType } from '../transport/subjects';
import { RequestLifecycle } from './request-lifecycle.service';

/** NATS `release` (the admin route `POST /admin/requests/:req_id/release` is the same path). */
@Controller()
export class RequestsController {
  constructor(private readonly lifecycle: RequestLifecycle) {}

  /** Idempotent: frees the staged embedding, defers while encoding, or leaves a tombstone. */
  @MessagePattern(DpType.Release)
  async release(
    @Payload(new ZodPipe(reqIdOnlySchema, 'release request')) req: ReqIdRequest,
  ): Promise<null> {
    await this.lifecycle.release(req.req_id);
    return null;
  }
}
