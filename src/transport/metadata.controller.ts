import { Controller } from '@nestjs/common';
import { Ctx, MessagePattern, NatsContext, Payload } from '@nestjs/microservices';
import type { Observable } from 'rxjs';
import { ZodPipe } from '../common/validation/zod.pipe';
import { MetadataService } from '../meta-registry/metadata.service';
import {
  publishMetadataSchema,
  reqIdOnlySchema,
  waitMetadataSchema,
  type PublishMetadataRequest,
  type ReqIdRequest,
  type WaitMetadataRequest,
  type WaitMetadataResponse,
} from '../meta-registry/meta.schema';
import { callTimeoutMs } from '../common/deadline';
import { DpType } from './subjects';

/** NATS handlers for the metadata dp_types; each is one call into MetadataService. */
@Controller()
export class MetadataController {
  constructor(private readonly metadata: MetadataService) {}

  @MessagePattern(DpType.PublishMetadata)
  publish(
    @Payload(new ZodPipe(publishMetadataSchema, 'publish_metadata request'))
    req: PublishMetadataRequest,
  ): Promise<null> {
    return this.metadata.publish(req);
  }

  @MessagePattern(DpType.WaitMetadata)
  wait(
    @Payload(new ZodPipe(waitMetadataSchema, 'wait_metadata request')) req: WaitMetadataRequest,
    @Ctx() ctx: NatsContext,
  ): Observable<WaitMetadataResponse> {
    const timeoutMs = callTimeoutMs(req.timeout_ms, this.metadata.maxTimeoutMs, ctx);
    return this.metadata.wait(req.req_id, req.part_idx, { timeoutMs });
  }

  @MessagePattern(DpType.HasMetadata)
  has(
    @Payload(new ZodPipe(reqIdOnlySchema, 'has_metadata request')) req: ReqIdRequest,
  ): Promise<{ req_id: string; present: boolean }> {
    return this.metadata.has(req.req_id);
  }
}
