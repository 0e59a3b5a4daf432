import { Controller, UseGuards } from '@nestjs/common';
import { AdminTokenGuard } from '../common/auth/admin-token.guard';
import { Ctx, MessagePattern, NatsContext, Payload } from '@nestjs/microservices';
import { Clock } from '../common/clock';
import { ZodPipe } from '../common/validation/zod.pipe';
import { AppConfig } from '../config/app-config';
import { EncodeRequestPipe } from '../encoder/encode-request.pipe';
import type { EncodeRequest } from '../encoder/encode-request.schema';
import { EncoderProbe, type ProbeResult } from '../encoder/encoder-probe.service';
import {
  registerRequestSchema,
  sendRequestSchema,
  type RegisterRequest,
  type SendRequest,
} from '../encoder/delivery.schema';
import { DeliveryService, type SendStatus } from '../encoder/delivery.service';
import { EncoderService, type EncodeResponse } from '../encoder/encoder.service';
import { profileRequestSchema } from '../encoder/profile.schema';
import {
  ProfilerService,
  type ProfileReply,
  type ProfileRequest,
} from '../encoder/profiler.service';
import { reqIdOnlySchema, type ReqIdRequest } from '../meta-registry/meta.schema';
import { callDeadline } from '../common/deadline';
import { DpType } from './subjects';

/** NATS handlers for the encoder's dp_types; each is one call into a service. */
@Controller()
export class EncoderController {
  constructor(
    private readonly encoder: EncoderService,
    private readonly probe: EncoderProbe,
    private readonly profiler: ProfilerService,
    private readonly config: AppConfig,
    private readonly clock: Clock,
    private readonly delivery: DeliveryService,
  ) {}

  private deadline(
    payload: { timeout_ms?: number; deadline_ms?: number },
    ctx: NatsContext,
  ): number {
    return callDeadline(payload, this.config.timeouts.reqTimeoutMs, ctx, this.clock.now());
  }

  @MessagePattern(DpType.Encode)
  encode(
    @Payload(EncodeRequestPipe) req: EncodeRequest,
    @Ctx() ctx: NatsContext,
  ): Promise<EncodeResponse> {
    return this.encoder.encode(req, this.deadline(req, ctx));
  }

  /** Delivers the staged embedding to `prefill_host:embedding_port`; answers after the receiver's ack. */
  @MessagePattern(DpType.Send)
  send(
    @Payload(new ZodPipe(sendRequestSchema, 'send request')) req: SendRequest,
    @Ctx() ctx: NatsContext,
  ): Promise<{ req_id: string; bytes: number; acked: true }> {
    return this.delivery.send(req, this.deadline(req, ctx));
  }

  @MessagePattern(DpType.RegisterDestinations)
  register(
    @Payload(new ZodPipe(registerRequestSchema, 'register_destinations request'))
    req: RegisterRequest,
    @Ctx() ctx: NatsContext,
  ): Promise<null> {
    return this.delivery.register(req, this.deadline(req, ctx));
  }

  @MessagePattern(DpType.SendStatus)
  sendStatus(
    @Payload(new ZodPipe(reqIdOnlySchema, 'send_status request')) req: ReqIdRequest,
  ): SendStatus {
    return this.delivery.status(req.req_id);
  }

  /** Idempotent: frees the staged embedding, defers while encoding, or leaves a tombstone. */
  @MessagePattern(DpType.Release)
  async release(
    @Payload(new ZodPipe(reqIdOnlySchema, 'release request')) req: ReqIdRequest,
  ): Promise<null> {
    await this.encoder.release(req.req_id);
    return null;
  }

  @MessagePattern(DpType.HealthEncode)
  health(): Promise<ProbeResult> {
    return this.probe.probe();
  }

  @UseGuards(AdminTokenGuard)
  @MessagePattern(DpType.StartProfile)
  startProfile(
    @Payload(new ZodPipe(profileRequestSchema, 'start_profile request')) req: ProfileRequest,
  ): Promise<ProfileReply> {
    return this.profiler.start(req);
  }

  @UseGuards(AdminTokenGuard)
  @MessagePattern(DpType.StopProfile)
  stopProfile(): Promise<ProfileReply> {
    return this.profiler.stop();
  }
}
