import { AwaitsReadiness } from '../common/readiness';
import { NatsOperation } from '../common/openapi/nats-operation';
import { Body, Controller, Get, HttpCode, Param, Post, Req, Res, UseGuards } from '@nestjs/common';
import { MessagePattern, Payload } from '@nestjs/microservices';
import { ApiBearerAuth, ApiBody, ApiTags } from '@nestjs/swagger';
import { AdminTokenGuard } from '../common/auth/admin-token.guard';
import type { Request, Response } from 'express';
import { CallDeadline } from '../common/deadline';
import { abortOnDisconnect } from '../common/http/abort-on-disconnect';
import { ApiReplies, openApiSchema } from '../common/openapi/zod-openapi';
import { ZodPipe } from '../common/validation/zod.pipe';
import { reqIdOnlySchema, reqIdSchema, type ReqIdRequest } from '../meta-registry/meta.schema';
import { OwnerRouted } from '../routing/owner-routed';
import { DpType } from '../transport/subjects';
import {
  registerRequestSchema,
  sendReplySchema,
  sendRequestSchema,
  sendStatusSchema,
  type RegisterRequest,
  type SendReply,
  type SendRequest,
} from './delivery.schema';
import { DeliveryService, type SendStatus } from './delivery.service';

/**
 * Delivery over both transports: `send`, destination registration and `send_status`.
 * Each is answered by the instance that holds the req_id's embedding (`@OwnerRouted`):
 * here, or forwarded to its owner when the metadata store is shared.
 */
@ApiTags('delivery')
@AwaitsReadiness()
@Controller()
export class DeliveryController {
  constructor(private readonly delivery: DeliveryService) {}

  /** SGLang's /send: deliver the staged embedding, answer after the receiver's ack. */
  @Post('send')
  @HttpCode(200)
  @OwnerRouted(DpType.Send, { waitForEncode: true })
  @ApiBody({ schema: openApiSchema(sendRequestSchema) })
  @ApiReplies(sendReplySchema, 400, 499, 500, 504)
  sendHttp(
    @Body(new ZodPipe(sendRequestSchema, 'send request')) body: SendRequest,
    @CallDeadline() deadline: number,
    @Req() req: Request,
    @Res({ passthrough: true }) res: Response,
  ): Promise<SendReply> {
    return this.delivery.send(body, deadline, abortOnDisconnect(req, res));
  }

  /** `send` and registration wait for an encode that has not started, as on one instance. */
  @MessagePattern(DpType.Send)
  @NatsOperation({
    what: "Deliver the staged embedding to `prefill_host:embedding_port`; answered after the receiver's ack.",
    request: sendRequestSchema,
    reply: sendReplySchema,
  })
  @OwnerRouted(DpType.Send, { waitForEncode: true })
  send(
    @Payload(new ZodPipe(sendRequestSchema, 'send request')) req: SendRequest,
    @CallDeadline() deadline: number,
  ): Promise<SendReply> {
    return this.delivery.send(req, deadline);
  }

  /** SGLang's destination registration (zmq_to_scheduler): `{req_id, receive_url, receive_count}`. */
  @Post('scheduler_receive_url')
  @HttpCode(200)
  @OwnerRouted(DpType.RegisterDestinations, { waitForEncode: true })
  @ApiBody({ schema: openApiSchema(registerRequestSchema) })
  registerHttp(
    @Body(new ZodPipe(registerRequestSchema, 'scheduler_receive_url request')) req: RegisterRequest,
    @CallDeadline() deadline: number,
  ): Promise<null> {
    return this.delivery.register(req, deadline);
  }

  @MessagePattern(DpType.RegisterDestinations)
  @NatsOperation({
    what: "Register a receiver (SGLang's zmq_to_scheduler): the embedding is pushed to `receive_url` once staged.",
    request: registerRequestSchema,
    reply: '`null`',
  })
  @OwnerRouted(DpType.RegisterDestinations, { waitForEncode: true })
  register(
    @Payload(new ZodPipe(registerRequestSchema, 'register_destinations request'))
    req: RegisterRequest,
    @CallDeadline() deadline: number,
  ): Promise<null> {
    return this.delivery.register(req, deadline);
  }

  /** Answered at once: an unknown req_id is a 404 here, without waiting for an encode. */
  @MessagePattern(DpType.SendStatus)
  @NatsOperation({
    what: "A request's phase and every destination's delivery state; 404 for an unknown req_id.",
    request: reqIdOnlySchema,
    reply: sendStatusSchema,
  })
  @OwnerRouted(DpType.SendStatus)
  sendStatus(
    @Payload(new ZodPipe(reqIdOnlySchema, 'send_status request')) req: ReqIdRequest,
  ): SendStatus {
    return this.delivery.status(req.req_id);
  }

  /**
   * One request's delivery status: receive_count, and each destination's outcome and
   * error; the HTTP twin of `send_status`.
   */
  @Get('admin/requests/:req_id')
  @ApiTags('admin')
  @ApiBearerAuth()
  @UseGuards(AdminTokenGuard)
  @OwnerRouted(DpType.SendStatus)
  sendStatusHttp(@Param('req_id', new ZodPipe(reqIdSchema, 'req_id')) reqId: string): SendStatus {
    return this.delivery.status(reqId);
  }
}
