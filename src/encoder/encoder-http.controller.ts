import { Body, Controller, HttpCode, Post, Req, Res } from '@nestjs/common';
import { ApiBody, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import type { Observable } from 'rxjs';
import { openApiSchema } from '../common/openapi/zod-openapi';
import { ZodPipe } from '../common/validation/zod.pipe';
import {
  waitMetadataSchema,
  type WaitMetadataRequest,
  type WaitMetadataResponse,
} from '../meta-registry/meta.schema';
import { MetadataService } from '../meta-registry/metadata.service';

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
  constructor(private readonly metadata: MetadataService) {}

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
    const timeoutMs = Math.min(body.timeout_ms ?? Infinity, this.metadata.maxTimeoutMs);
    return this.metadata.wait(body.req_id, body.part_idx, {
      timeoutMs,
      signal: abortOnDisconnect(req, res),
    });
  }
}
