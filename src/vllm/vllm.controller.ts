import { Body, Controller, Get, Headers, HttpCode, Post, Res, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { randomUUID } from 'node:crypto';
import { AdminTokenGuard } from '../common/auth/admin-token.guard';
import { Clock } from '../common/clock';
import { CallDeadline } from '../common/deadline';
import { Errors } from '../common/errors/error-catalogue';
import { openApiSchema } from '../common/openapi/zod-openapi';
import { AwaitsReadiness } from '../common/readiness';
import { ZodPipe } from '../common/validation/zod.pipe';
import { AppConfig } from '../config/app-config';
import { chatRequestSchema, type ChatRequest } from './chat-request.schema';
import { EcStore, type EcStoreStats } from './ec-store.service';
import { ProxyRegistrar, type ProxyView } from './proxy-registrar.service';
import { VllmEncodeService, type EcItem } from './vllm-encode.service';

/** An `x-request-id` echoed as sent: printable ASCII, at most 256 characters. */
const REQUEST_ID = /^[\x21-\x7e]{1,256}$/;

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: {
    index: number;
    message: { role: 'assistant'; content: string };
    logprobs: null;
    finish_reason: 'stop';
  }[];
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
  ec_transfer_params: { ec_items: EcItem[] };
}

/**
 * vLLM's encode instance over HTTP, for its disagg proxy: `POST /v1/chat/completions` with
 * the proxy's body answers a chat completion whose `ec_transfer_params.ec_items` name each
 * part's key and grid, once each file is in place. `GET /admin/vllm`: the EC path and the
 * proxies.
 */
@ApiTags('vllm')
@AwaitsReadiness()
@Controller()
export class VllmController {
  constructor(
    private readonly vllm: VllmEncodeService,
    private readonly config: AppConfig,
    private readonly clock: Clock,
  ) {}

  @Post('v1/chat/completions')
  @HttpCode(200)
  @ApiBody({ schema: openApiSchema(chatRequestSchema) })
  async chat(
    @Body(new ZodPipe(chatRequestSchema, '/v1/chat/completions request')) req: ChatRequest,
    @Headers('x-request-id') header: string | undefined,
    @Res({ passthrough: true }) res: Response,
    @CallDeadline() deadline: number,
  ): Promise<ChatCompletion> {
    const requestId = header && REQUEST_ID.test(header) ? header : randomUUID();
    res.setHeader('x-request-id', requestId);
    if (!this.vllm.enabled) throw Errors.vllmFaceOff();
    const { items, tokens } = await this.vllm.encode(req, deadline);
    return {
      id: `chatcmpl-${requestId}`,
      object: 'chat.completion',
      created: Math.floor(this.clock.now() / 1000),
      model: req.model ?? this.config.vllm.modelId ?? '',
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: '' },
          logprobs: null,
          finish_reason: 'stop',
        },
      ],
      usage: { prompt_tokens: tokens, completion_tokens: 0, total_tokens: tokens },
      ec_transfer_params: { ec_items: items },
    };
  }
}

/** The EC path and the proxies, as `GET /admin/vllm` (answered while the model loads). */
@ApiTags('admin')
@ApiBearerAuth()
@UseGuards(AdminTokenGuard)
@Controller()
export class VllmAdminController {
  constructor(
    private readonly store: EcStore,
    private readonly registrar: ProxyRegistrar,
    private readonly config: AppConfig,
  ) {}

  @Get('admin/vllm')
  view(): {
    model_id: string | null;
    hash_algorithm: string;
    ec: EcStoreStats;
    proxies: readonly ProxyView[];
  } {
    return {
      model_id: this.config.vllm.modelId ?? null,
      hash_algorithm: this.config.vllm.hashAlgorithm,
      ec: this.store.stats(),
      proxies: this.registrar.views,
    };
  }
}
