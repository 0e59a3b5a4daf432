import { Body, Controller, HttpCode, Post, Req, Res } from '@nestjs/common';
import { Ctx, MessagePattern, NatsContext, Payload } from '@nestjs/microservices';
import { ApiBody, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { z } from 'zod';
import { Deadlines } from '../common/deadline';
import { abortOnDisconnect } from '../common/http/abort-on-disconnect';
import { ApiReplies, openApiSchema } from '../common/openapi/zod-openapi';
import { ZodPipe } from '../common/validation/zod.pipe';
import { reqIdOnlySchema, type ReqIdRequest } from '../meta-registry/meta.schema';
import { DpType } from '../transport/subjects';
import {
  registerRequestSchema,
  sendRequestSchema,
  type RegisterRequest,
  type SendRequest,
} from './delivery.schema';
import { DeliveryService, type SendStatus } from './delivery.service';

const sendReplySchema = z.object({
  req_id: z.string(),
  bytes: z.number().int().nonnegative(),
  acked: z.literal(true),
});
type SendReply = z.output<typeof sendReplySchema>;

/** Delivery over both transports: `send`, destination registration and `send_status`. */
@ApiTags('delivery')
@Controller()
export class DeliveryController {
  constructor(
    private readonly delivery: DeliveryService,
    private readonly deadlines: Deadlines,
  ) {}

  /** SGLang's /send: deliver the staged embedding, answer after the receiver's ack. */
  @Post('send')
  @HttpCode(200)
  @ApiBody({ schema: openApiSchema(sendRequestSchema) })
  @ApiReplies(sendReplySchema, 400, 499, 500, 504)
  sendHttp(
    @Body(new ZodPipe(sendRequestSchema, 'send request')) body: SendRequest,
    @Req() req: Request,
    @Res({ passthrough: true }) res: Response,
  ): Promise<SendReply> {
    return this.delivery.send(body, this.deadlines.of(body), abortOnDisconnect(req, res));
  }

  @MessagePattern(DpType.Send)
  send(
    @Payload(new ZodPipe(sendRequestSchema, 'send request')) req: SendRequest,
    @Ctx() ctx: NatsContext,
  ): Promise<SendReply> {
    return this.delivery.send(req, this.deadlines.of(req, ctx));
  }

  /** SGLang's destination registration (zmq_to_scheduler): `{req_id, receive_url, receive_count}`. */
  @Post('scheduler_receive_url')
  @HttpCode(200)
  @ApiBody({ schema: openApiSchema(registerRequestSchema) })
  registerHttp(
    @Body(new ZodPipe(registerRequestSchema, 'scheduler_receive_url request')) req: RegisterRequest,
  ): Promise<null> {
    return this.delivery.register(req, this.deadlines.of(req));
  }

  @MessagePattern(DpType.RegisterDestinations)
  register(
    @Payload(new ZodPipe(registerRequestSchema, 'register_destinations request'))
    req: RegisterRequest,
    @Ctx() ctx: NatsContext,
  ): Promise<null> {
    return this.delivery.register(req, this.deadlines.of(req, ctx));
  }

  @MessagePattern(DpType.SendStatus)
  sendStatus(
    @Payload(new ZodPipe(reqIdOnlySchema, 'send_status request')) req: ReqIdRequest,
  ): SendStatus {
    return this.delivery.status(req.req_id);
  }
}
