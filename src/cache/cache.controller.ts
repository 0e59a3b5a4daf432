import { Controller, Delete, Get, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { AdminTokenGuard } from '../common/auth/admin-token.guard';
import type { CacheStats } from './embedding-cache';
import { EncodeCache, type ClusterView } from './encode-cache.service';
import { ObjectTier, type ObjectTierStats } from './object-tier';

/** The embedding cache: entries, bytes, hit ratio, the most used keys; and a purge. */
@ApiTags('admin')
@ApiBearerAuth()
@UseGuards(AdminTokenGuard)
@Controller('admin/cache')
export class CacheController {
  constructor(
    private readonly cache: EncodeCache,
    private readonly tier: ObjectTier,
  ) {}

  @Get()
  view(): CacheStats & { single_flight: ClusterView; object_store?: ObjectTierStats } {
    const tier = this.tier.enabled ? this.tier.stats() : undefined;
    return {
      ...this.cache.store.view(),
      single_flight: this.cache.clusterView(),
      ...(tier ? { object_store: tier } : {}),
    };
  }

  /** Drops every entry; staged requests and sends holding the same rows are unaffected. */
  @Delete()
  purge(): { purged: number } {
    return { purged: this.cache.store.purge() };
  }
}
