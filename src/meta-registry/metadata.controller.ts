import { AwaitsReadiness } from '../common/readiness';
import { NatsOperation } from '../common/openapi/nats-operation';
import { Body, Controller, HttpCode, Post, Req, Res } from '@nestjs/common';
import { MessagePattern, Payload } from '@nestjs/microservices';
import { ApiBody, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import type { Observable } from 'rxjs';
import { CallTimeoutMs } from '../common/deadline';
import { abortOnDisconnect } from '../common/http/abort-on-disconnect';
import { ApiReplies, openApiSchema } from '../common/openapi/zod-openapi';
import { ZodPipe } from '../common/validation/zod.pipe';
import { DpType } from '../transport/subjects';
import {
  hasMetadataResponseSchema,
  publishMetadataSchema,
  reqIdOnlySchema,
  waitMetadataResponseSchema,
  waitMetadataSchema,
  type PublishMetadataRequest,
  type ReqIdRequest,
  type WaitMetadataRequest,
  type WaitMetadataResponse,
} from './meta.schema';
import { MetadataService } from './metadata.service';

/** The metadata registry over NATS (publish, wait, has) and SGLang's HTTP metadata pull. */
@ApiTags('metadata')
@AwaitsReadiness()
@Controller()
export class MetadataController {
  constructor(private readonly metadata: MetadataService) {}

  @MessagePattern(DpType.PublishMetadata)
  @NatsOperation({
    what: 'Publish the metadata of a req_id (or `{error}`), waking every waiter.',
    request: publishMetadataSchema,
    reply: '`null`',
  })
  publish(
    @Payload(new ZodPipe(publishMetadataSchema, 'publish_metadata request'))
    req: PublishMetadataRequest,
  ): Promise<null> {
    return this.metadata.publish(req);
  }

  @MessagePattern(DpType.WaitMetadata)
  @NatsOperation({
    what: 'Wait until the metadata of a req_id is published; 504 `encode metadata not ready` at the deadline (`timeout_ms`, capped by EPD_REQ_TIMEOUT_MS).',
    request: waitMetadataSchema,
    reply: waitMetadataResponseSchema,
  })
  wait(
    @Payload(new ZodPipe(waitMetadataSchema, 'wait_metadata request')) req: WaitMetadataRequest,
    @CallTimeoutMs() timeoutMs: number,
  ): Observable<WaitMetadataResponse> {
    return this.metadata.wait(req.req_id, req.part_idx, { timeoutMs });
  }

  @MessagePattern(DpType.HasMetadata)
  @NatsOperation({
    what: 'Whether metadata is published for a req_id, without waiting.',
    request: reqIdOnlySchema,
    reply: hasMetadataResponseSchema,
  })
  has(
    @Payload(new ZodPipe(reqIdOnlySchema, 'has_metadata request')) req: ReqIdRequest,
  ): Promise<{ req_id: string; present: boolean }> {
    return this.metadata.has(req.req_id);
  }

  /** Blocks until the metadata of `req_id` is published; 504 "encode metadata not ready". */
  @Post('scheduler_receive_meta_data')
  @HttpCode(200)
  @ApiBody({ schema: openApiSchema(waitMetadataSchema) })
  @ApiReplies(waitMetadataResponseSchema, 400, 500, 503, 504)
  receiveMetadata(
    @Body(new ZodPipe(waitMetadataSchema, 'scheduler_receive_meta_data request'))
    body: WaitMetadataRequest,
    @CallTimeoutMs() timeoutMs: number,
    @Req() req: Request,
    @Res({ passthrough: true }) res: Response,
  ): Observable<WaitMetadataResponse> {
    return this.metadata.wait(body.req_id, body.part_idx, {
      timeoutMs,
      signal: abortOnDisconnect(req, res),
    });
  }
}
