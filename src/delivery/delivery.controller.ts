import { Body, Controller, HttpCode, Post, Req, Res } from '@nestjs/common';
import { Ctx, MessagePattern, NatsContext, Payload } from '@nestjs/microservices';
import { ApiBody, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { Deadlines } from '../common/deadline';
import { abortOnDisconnect } from '../common/http/abort-on-disconnect';
import { ApiReplies, openApiSchema } from '../common/openapi/zod-openapi';
import { ZodPipe } from '../common/validation/zod.pipe';
import { reqIdOnlySchema, type ReqIdRequest } from '../meta-registry/meta.schema';
import { ReqStateStore } from '../requests/req-state.store';
import { OwnerRouter, routeOptions, type RouteOptions } from '../routing/owner-router.service';
import { DpType } from '../transport/subjects';
import {
  registerRequestSchema,
  sendReplySchema,
  sendRequestSchema,
  type RegisterRequest,
  type SendReply,
  type SendRequest,
} from './delivery.schema';
import { DeliveryService, type SendStatus } from './delivery.service';

/**
 * Delivery over both transports: `send`, destination registration and `send_status`.
 * Each is answered by the instance that holds the req_id's embedding (OwnerRouter): here,
 * or forwarded to its owner when the metadata store is shared.
 */
@ApiTags('delivery')
@Controller()
export class DeliveryController {
  constructor(
    private readonly delivery: DeliveryService,
    private readonly deadlines: Deadlines,
    private readonly router: OwnerRouter,
    private readonly states: ReqStateStore,
  ) {}

  /** `send` and registration wait for an encode that has not started, as on one instance. */
  private options(reqId: string, ctx?: NatsContext, waitForEncode = true): RouteOptions {
    return routeOptions(this.states, reqId, ctx, waitForEncode);
  }

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
    const deadline = this.deadlines.of(body);
    const abort = abortOnDisconnect(req, res);
    return this.router.route(
      DpType.Send,
      body.req_id,
      body,
      deadline,
      () => this.delivery.send(body, deadline, abort),
      this.options(body.req_id),
    );
  }

  @MessagePattern(DpType.Send)
  send(
    @Payload(new ZodPipe(sendRequestSchema, 'send request')) req: SendRequest,
    @Ctx() ctx: NatsContext,
  ): Promise<SendReply> {
    const deadline = this.deadlines.of(req, ctx);
    return this.router.route(
      DpType.Send,
      req.req_id,
      req,
      deadline,
      () => this.delivery.send(req, deadline),
      this.options(req.req_id, ctx),
    );
  }

  /** SGLang's destination registration (zmq_to_scheduler): `{req_id, receive_url, receive_count}`. */
  @Post('scheduler_receive_url')
  @HttpCode(200)
  @ApiBody({ schema: openApiSchema(registerRequestSchema) })
  registerHttp(
    @Body(new ZodPipe(registerRequestSchema, 'scheduler_receive_url request')) req: RegisterRequest,
  ): Promise<null> {
    return this.registerRouted(req, this.deadlines.of(req));
  }

  @MessagePattern(DpType.RegisterDestinations)
  register(
    @Payload(new ZodPipe(registerRequestSchema, 'register_destinations request'))
    req: RegisterRequest,
    @Ctx() ctx: NatsContext,
  ): Promise<null> {
    return this.registerRouted(req, this.deadlines.of(req, ctx), ctx);
  }

  private registerRouted(req: RegisterRequest, deadline: number, ctx?: NatsContext) {
    return this.router.route(
      DpType.RegisterDestinations,
      req.req_id,
      req,
      deadline,
      () => this.delivery.register(req, deadline),
      this.options(req.req_id, ctx),
    );
  }

  /** Answered at once: an unknown req_id is a 404 here, without waiting for an encode. */
  @MessagePattern(DpType.SendStatus)
  sendStatus(
    @Payload(new ZodPipe(reqIdOnlySchema, 'send_status request')) req: ReqIdRequest,
    @Ctx() ctx: NatsContext,
  ): Promise<SendStatus> {
    return this.router.route(
      DpType.SendStatus,
      req.req_id,
      req,
      this.deadlines.of({}, ctx),
      () => Promise.resolve(this.delivery.status(req.req_id)),
      this.options(req.req_id, ctx, false),
    );
  }
}
