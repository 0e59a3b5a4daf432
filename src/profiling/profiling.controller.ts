import { z } from 'zod';
import { NatsOperation } from '../common/openapi/nats-operation';
import { Body, Controller, Get, Header, HttpCode, Post, UseGuards } from '@nestjs/common';
import { MessagePattern, Payload } from '@nestjs/microservices';
import { ApiBearerAuth, ApiBody, ApiTags } from '@nestjs/swagger';
import { AdminTokenGuard } from '../common/auth/admin-token.guard';
import { openApiSchema } from '../common/openapi/zod-openapi';
import { ZodPipe } from '../common/validation/zod.pipe';
import { DpType } from '../transport/subjects';
import { profileRequestSchema } from './profile.schema';
import { ProfileControl, type ProfileReply } from './profile-control';
import type { ProfileRequest } from './profile.schema';

const TEXT = 'text/plain; charset=utf-8';

/**
 * SGLang's start_profile / stop_profile: text over HTTP (as SGLang answers), `{ok, msg}`
 * over NATS. Guarded by EPD_ADMIN_TOKEN on both transports. Acts on this process's
 * profiler, or in a DP supervisor on every worker's (ProfileControl).
 */
@ApiTags('profiling')
@ApiBearerAuth()
@UseGuards(AdminTokenGuard)
@Controller()
export class ProfilingController {
  constructor(private readonly profiler: ProfileControl) {}

  @Get('start_profile')
  @Header('content-type', TEXT)
  async startGet(): Promise<string> {
    return `${(await this.profiler.start({})).msg}\n`;
  }

  @Post('start_profile')
  @HttpCode(200)
  @Header('content-type', TEXT)
  @ApiBody({ schema: openApiSchema(profileRequestSchema) })
  async startPost(
    @Body(new ZodPipe(profileRequestSchema, 'start_profile request')) body: ProfileRequest,
  ): Promise<string> {
    return `${(await this.profiler.start(body ?? {})).msg}\n`;
  }

  @Get('stop_profile')
  @Header('content-type', TEXT)
  async stopGet(): Promise<string> {
    return `${(await this.profiler.stop()).msg}\n`;
  }

  @Post('stop_profile')
  @HttpCode(200)
  @Header('content-type', TEXT)
  async stopPost(): Promise<string> {
    return `${(await this.profiler.stop()).msg}\n`;
  }

  @MessagePattern(DpType.StartProfile)
  @NatsOperation({
    what: 'Start the V8 CPU profiler (needs the admin token in an `Authorization` header when EPD_ADMIN_TOKEN is set).',
    request: profileRequestSchema,
    reply: '`{ok, msg}`',
  })
  start(
    @Payload(new ZodPipe(profileRequestSchema, 'start_profile request')) req: ProfileRequest,
  ): Promise<ProfileReply> {
    return this.profiler.start(req);
  }

  @MessagePattern(DpType.StopProfile)
  @NatsOperation({
    what: 'Stop the profiler and write the profile (same token rule).',
    request: z.object({}),
    reply: '`{ok, msg, path?}`',
  })
  stop(): Promise<ProfileReply> {
    return this.profiler.stop();
  }
}
