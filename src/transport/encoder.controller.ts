import { Controller } from '@nestjs/common';
import { Ctx, MessagePattern, NatsContext, Payload } from '@nestjs/microservices';
import { Clock } from '../common/clock';
import { ZodPipe } from '../common/validation/zod.pipe';
import { AppConfig } from '../config/app-config';
import { EncodeRequestPipe } from '../encoder/encode-request.pipe';
import type { EncodeRequest } from '../encoder/encode-request.schema';
import { EncoderProbe, type ProbeResult } from '../encoder/encoder-probe.service';
import { EncoderService, type EncodeResponse } from '../encoder/encoder.service';
import { profileRequestSchema } from '../encoder/profile.schema';
import {
  ProfilerService,
  type ProfileReply,
  type ProfileRequest,
} from '../encoder/profiler.service';
import { reqIdOnlySchema, type ReqIdRequest } from '../meta-registry/meta.schema';
import { callTimeoutMs } from './deadline';
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
  ) {}

  @MessagePattern(DpType.Encode)
  encode(
    @Payload(EncodeRequestPipe) req: EncodeRequest,
    @Ctx() ctx: NatsContext,
  ): Promise<EncodeResponse> {
    const timeoutMs = callTimeoutMs(req.timeout_ms, this.config.timeouts.reqTimeoutMs, ctx);
    return this.encoder.encode(req, this.clock.now() + timeoutMs);
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

  @MessagePattern(DpType.StartProfile)
  startProfile(
    @Payload(new ZodPipe(profileRequestSchema, 'start_profile request')) req: ProfileRequest,
  ): Promise<ProfileReply> {
    return this.profiler.start(req);
  }

  @MessagePattern(DpType.StopProfile)
  stopProfile(): Promise<ProfileReply> {
    return this.profiler.stop();
  }
}
