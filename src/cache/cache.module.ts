import { Injectable, Module, type OnModuleInit } from '@nestjs/common';
import { ShutdownPhases } from '../common/shutdown-phases';
import { AppConfig } from '../config/app-config';
import { MetaRegistryModule } from '../meta-registry/meta-registry.module';
import { ParentLink } from '../transport/parent-link';
import { CacheController } from './cache.controller';
import { CacheMetrics } from './cache.metrics';
import { EncodeCache, type ClusterView } from './encode-cache.service';
import type { CacheStats } from './embedding-cache';
import { EncodeFlights } from './encode-flights.service';
import { ObjectTier } from './object-tier';
import { CLAIMS_PROVIDERS } from './claims.providers';
import type { IpcTopic } from '../transport/ipc-topics';

/** A DP worker's cache, for its supervisor's GET / DELETE /admin/cache. */
@Injectable()
class CacheReports implements OnModuleInit {
  constructor(
    private readonly link: ParentLink,
    private readonly cache: EncodeCache,
  ) {}

  onModuleInit(): void {
    this.link.handle('cache', () => ({
      ...this.cache.store.view(),
      single_flight: this.cache.clusterView(),
    }));
    this.link.handle('cache_purge', () => ({ purged: this.cache.store.purge() }));
  }
}

/**
 * The embedding cache keyed by content (EPD_CACHE_MAX_BYTES; off at 0), in the process
 * that encodes: one process, or each DP worker.
 */
@Module({
  imports: [MetaRegistryModule],
  controllers: [CacheController],
  providers: [
    ...CLAIMS_PROVIDERS,
    EncodeCache,
    EncodeFlights,
    ObjectTier,
    CacheMetrics,
    CacheReports,
  ],
  exports: [EncodeCache, EncodeFlights, ObjectTier],
})
export class CacheModule {
  constructor(phases: ShutdownPhases, tier: ObjectTier, config: AppConfig) {
    if (!tier.enabled) return;
    // What the write queue still holds when the process stops, within EPD_DRAIN_MS.
    phases.on('flush-cache', 'cached embeddings', (startedAt) =>
      tier.flushedBy(startedAt + config.shutdown.drainMs),
    );
  }
}

declare module '../transport/ipc-topics' {
  interface IpcTopics {
    /** Supervisor → worker: its cache and single-flight view, for GET /admin/cache. */
    cache: IpcTopic<void, CacheStats & { single_flight: ClusterView }>;
    /** Supervisor → worker: purge its cache (DELETE /admin/cache). */
    cache_purge: IpcTopic<void, { purged: number }>;
  }
}
