import { Controller, Get, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { AdminTokenGuard } from '../common/auth/admin-token.guard';
import { EmbeddingHandoff, type HandoffStats } from './embedding-handoff.service';

/** Staged embeddings handed to the cluster and taken over: counts, the last drain, the bucket. */
@ApiTags('admin')
@ApiBearerAuth()
@UseGuards(AdminTokenGuard)
@Controller('admin/handoff')
export class HandoffController {
  constructor(private readonly handoff: EmbeddingHandoff) {}

  @Get()
  view(): HandoffStats {
    return this.handoff.stats();
  }
}
