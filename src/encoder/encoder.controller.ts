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
  health(): Promise<ProbeReply> {
    return this.gateway.probe();
  }
}
