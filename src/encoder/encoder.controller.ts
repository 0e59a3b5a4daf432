import { AwaitsReadiness } from '../common/readiness';
import { z } from 'zod';
import { NatsOperation } from '../common/openapi/nats-operation';
import { Body, Controller, Get, HttpCode, Post } from '@nestjs/common';
import { MessagePattern, Payload } from '@nestjs/microservices';
import { ApiBody, ApiTags } from '@nestjs/swagger';
import { CallDeadline } from '../common/deadline';
import { ApiReplies, openApiSchema } from '../common/openapi/zod-openapi';
import { DpType } from '../transport/subjects';
import { EncodeRequestPipe } from './pipeline/encode-request.pipe';
import { encodeRequestSchema, type EncodeRequest } from './encode-request.schema';
import { EncodeGateway, type ProbeReply } from './encode-gateway';
import { encodeResponseSchema, type EncodeResponse } from './encode-response';

/**
 * `encode` and the functional probe, over HTTP (SGLang's routes) and NATS, on this
 * process's pipeline or, in a DP supervisor, on its workers (EncodeGateway).
 */
@ApiTags('encoder')
@AwaitsReadiness()
@Controller()
export class EncoderController {
  constructor(private readonly gateway: EncodeGateway) {}

  @Post('encode')
  @HttpCode(200)
  @ApiBody({ schema: openApiSchema(encodeRequestSchema) })
  @ApiReplies(encodeResponseSchema, 400, 409, 413, 500, 503, 504, 507)
  encodeHttp(
    @Body() raw: object,
    @Body(EncodeRequestPipe) req: EncodeRequest,
    @CallDeadline() deadline: number,
  ): Promise<EncodeResponse> {
    return this.gateway.encode(raw, req, deadline);
  }

  @MessagePattern(DpType.Encode)
  @NatsOperation({
    what: 'Load, preprocess and encode media; metadata is published as soon as the size is known, and the embedding is staged (and pushed to `prefill_host:embedding_port` when given).',
    request: encodeRequestSchema,
    reply: encodeResponseSchema,
  })
  encode(
    @Payload() raw: object,
    @Payload(EncodeRequestPipe) req: EncodeRequest,
    @CallDeadline() deadline: number,
  ): Promise<EncodeResponse> {
    return this.gateway.encode(raw, req, deadline);
  }

  /** A real encode of a tiny image (or recent forward progress when busy); 503 on failure. */
  @Get('health_generate')
  healthGenerate(): Promise<ProbeReply> {
    return this.gateway.probe();
  }

  @MessagePattern(DpType.HealthEncode)
  @NatsOperation({
    what: 'Run a tiny real encode (or report a recent batch while busy).',
    request: z.object({}),
    reply: '`{ok: true, latency_ms, source: "probe" | "recent-batch" | "dp", msg?}`',
  })
  health(): Promise<ProbeReply> {
    return this.gateway.probe();
  }
}
