import { Body, Controller, Get, Header, HttpCode, Post, Req, Res, UseGuards } from '@nestjs/common';
import { AdminTokenGuard } from '../common/auth/admin-token.guard';
import { ApiBody, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import type { Observable } from 'rxjs';
import { Clock } from '../common/clock';
import { callDeadline, callTimeoutMs } from '../common/deadline';
import { openApiSchema } from '../common/openapi/zod-openapi';
import { ZodPipe } from '../common/validation/zod.pipe';
import {
  waitMetadataSchema,
  type WaitMetadataRequest,
  type WaitMetadataResponse,
} from '../meta-registry/meta.schema';
import { MetadataService } from '../meta-registry/metadata.service';
import {
  registerRequestSchema,
  sendRequestSchema,
  type RegisterRequest,
  type SendRequest,
} from './delivery.schema';
import { DeliveryService } from './delivery.service';
import { EncodeRequestPipe } from './encode-request.pipe';
import { encodeRequestSchema, type EncodeRequest } from './encode-request.schema';
import { EncoderProbe, type ProbeResult } from './encoder-probe.service';
import { EncoderService, type EncodeResponse } from './encoder.service';
import { profileRequestSchema } from './profile.schema';
import { ProfilerService, type ProfileRequest } from './profiler.service';

/** Aborts when the HTTP client goes away before the answer, so its wait is freed at once. */
function abortOnDisconnect(req: Request, res: Response): AbortSignal {
  const controller = new AbortController();
  req.socket.once('close', () => {
    if (!res.writableEnded) controller.abort();
  });
  return controller.signal;
}

/** SGLang-compatible HTTP routes of the encoder server (DESIGN.md §5). */
@ApiTags('encoder')
@Controller()
export class EncoderHttpController {
  constructor(
    private readonly metadata: MetadataService,
    private readonly encoder: EncoderService,
    private readonly probe: EncoderProbe,
    private readonly profiler: ProfilerService,
    private readonly clock: Clock,
    private readonly delivery: DeliveryService,
  ) {}

  private deadline(payload: { timeout_ms?: number; deadline_ms?: number }): number {
    return callDeadline(payload, this.metadata.maxTimeoutMs, undefined, this.clock.now());
  }

  @Post('encode')
  @HttpCode(200)
  @ApiBody({ schema: openApiSchema(encodeRequestSchema) })
  encode(@Body(EncodeRequestPipe) req: EncodeRequest): Promise<EncodeResponse> {
    return this.encoder.encode(req, this.deadline(req));
  }

  /** SGLang's /send: deliver the staged embedding, answer after the receiver's ack. */
  @Post('send')
  @HttpCode(200)
  @ApiBody({ schema: openApiSchema(sendRequestSchema) })
  send(
    @Body(new ZodPipe(sendRequestSchema, 'send request')) body: SendRequest,
    @Req() req: Request,
    @Res({ passthrough: true }) res: Response,
  ): Promise<{ req_id: string; bytes: number; acked: true }> {
    return this.delivery.send(body, this.deadline(body), abortOnDisconnect(req, res));
  }

  /** SGLang's destination registration (zmq_to_scheduler): `{req_id, receive_url, receive_count}`. */
  @Post('scheduler_receive_url')
  @HttpCode(200)
  @ApiBody({ schema: openApiSchema(registerRequestSchema) })
  register(
    @Body(new ZodPipe(registerRequestSchema, 'scheduler_receive_url request')) req: RegisterRequest,
  ): Promise<null> {
    return this.delivery.register(req, this.deadline(req));
  }

  /** Blocks until the metadata of `req_id` is published; 504 "encode metadata not ready". */
  @Post('scheduler_receive_meta_data')
  @HttpCode(200)
  @ApiBody({ schema: openApiSchema(waitMetadataSchema) })
  receiveMetadata(
    @Body(new ZodPipe(waitMetadataSchema, 'scheduler_receive_meta_data request'))
    body: WaitMetadataRequest,
    @Req() req: Request,
    @Res({ passthrough: true }) res: Response,
  ): Observable<WaitMetadataResponse> {
    return this.metadata.wait(body.req_id, body.part_idx, {
      timeoutMs: callTimeoutMs(body.timeout_ms, this.metadata.maxTimeoutMs),
      signal: abortOnDisconnect(req, res),
    });
  }

  /** A real encode of a tiny image (or recent forward progress when busy); 503 on failure. */
  @Get('health_generate')
  healthGenerate(): Promise<ProbeResult> {
    return this.probe.probe();
  }

  @UseGuards(AdminTokenGuard)
  @Get('start_profile')
  @Header('content-type', 'text/plain; charset=utf-8')
  async startProfileGet(): Promise<string> {
    return `${(await this.profiler.start({})).msg}\n`;
  }

  @UseGuards(AdminTokenGuard)
  @Post('start_profile')
  @HttpCode(200)
  @Header('content-type', 'text/plain; charset=utf-8')
  @ApiBody({ schema: openApiSchema(profileRequestSchema) })
  async startProfile(
    @Body(new ZodPipe(profileRequestSchema, 'start_profile request')) body: ProfileRequest,
  ): Promise<string> {
    return `${(await this.profiler.start(body ?? {})).msg}\n`;
  }

  @UseGuards(AdminTokenGuard)
  @Get('stop_profile')
  @Header('content-type', 'text/plain; charset=utf-8')
  async stopProfileGet(): Promise<string> {
    return `${(await this.profiler.stop()).msg}\n`;
  }

  @UseGuards(AdminTokenGuard)
  @Post('stop_profile')
  @HttpCode(200)
  @Header('content-type', 'text/plain; charset=utf-8')
  async stopProfile(): Promise<string> {
    return `${(await this.profiler.stop()).msg}\n`;
  }
}
