import { Body, Controller, Delete, Get, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiTags } from '@nestjs/swagger';
import { Clock } from '../common/clock';
import { Errors } from '../common/errors/error-catalogue';
import { openApiSchema } from '../common/openapi/zod-openapi';
import { ZodPipe } from '../common/validation/zod.pipe';
import { MetaRegistry, type RegistryStats } from '../meta-registry/meta-registry.service';
import type { z } from 'zod';
import { adminPublishSchema, reqIdSchema, type MetaPayload } from '../meta-registry/meta.schema';
import { MetadataService } from '../meta-registry/metadata.service';
import type { Owner } from '../meta-registry/meta-store';
import { AdminTokenGuard } from '../common/auth/admin-token.guard';

interface RegistryEntryView {
  req_id: string;
  part_idx: number | null;
  metadata: MetaPayload;
  age_ms: number;
  /** The instance (and DP rank, and that worker's pid) holding the embedding, if recorded. */
  owner: Owner | null;
}

@ApiTags('admin')
@ApiBearerAuth()
@UseGuards(AdminTokenGuard)
@Controller('admin/registry')
export class AdminController {
  constructor(
    private readonly registry: MetaRegistry,
    private readonly metadata: MetadataService,
    private readonly clock: Clock,
  ) {}

  /** Entries, pending waiters, oldest entry age and lifetime counters. */
  @Get()
  stats(): Promise<RegistryStats> {
    return this.registry.stats();
  }

  @Get(':req_id')
  async entry(
    @Param('req_id', new ZodPipe(reqIdSchema, 'req_id')) reqId: string,
  ): Promise<RegistryEntryView> {
    const record = await this.registry.get(reqId);
    if (!record) throw Errors.unknownReqId(reqId);
    return {
      req_id: record.reqId,
      part_idx: record.partIdx ?? null,
      metadata: record.metadata,
      age_ms: this.clock.now() - record.publishedAt,
      owner: record.owner ?? null,
    };
  }

  /** Publishes for operators: wakes waiters exactly as a preprocessor's publish would. */
  @Post(':req_id')
  @HttpCode(200)
  @ApiBody({ schema: openApiSchema(adminPublishSchema) })
  async publish(
    @Param('req_id', new ZodPipe(reqIdSchema, 'req_id')) reqId: string,
    @Body(new ZodPipe(adminPublishSchema, 'publish body')) body: z.infer<typeof adminPublishSchema>,
  ): Promise<{ req_id: string; published: true }> {
    await this.metadata.publish({ req_id: reqId, ...body });
    return { req_id: reqId, published: true };
  }

  @Delete(':req_id')
  async discard(
    @Param('req_id', new ZodPipe(reqIdSchema, 'req_id')) reqId: string,
  ): Promise<{ req_id: string; deleted: true }> {
    if (!(await this.registry.discard(reqId))) throw Errors.unknownReqId(reqId);
    return { req_id: reqId, deleted: true };
  }
}
