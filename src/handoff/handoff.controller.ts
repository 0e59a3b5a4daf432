import { Controller, Get, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { AdminTokenGuard } from '../common/auth/admin-token.guard';
import { ObjectTier, type ObjectTierStats } from '../cache/object-tier';
import { EmbeddingHandoff, type HandoffStats } from './embedding-handoff.service';

/** Staged embeddings handed to the cluster and taken over: counts, the last drain, the store. */
@ApiTags('admin')
@ApiBearerAuth()
@UseGuards(AdminTokenGuard)
@Controller('admin/handoff')
export class HandoffController {
  constructor(
    private readonly handoff: EmbeddingHandoff,
    private readonly tier: ObjectTier,
  ) {}

  @Get()
  view(): HandoffStats & { object_store: ObjectTierStats } {
    return { ...this.handoff.stats(), object_store: this.tier.stats() };
  }
}
