import { Module } from '@nestjs/common';
import { ShutdownPhases } from '../common/shutdown-phases';
import { CacheModule } from '../cache/cache.module';
import { MetaRegistryModule } from '../meta-registry/meta-registry.module';
import { RequestsModule } from '../requests/requests.module';
import { RoutingModule } from '../routing/routing.module';
import { EmbeddingHandoff } from './embedding-handoff.service';
import { OwnerRouter } from '../routing/owner-router.service';
import { HandoffController } from './handoff.controller';

/**
 * Staged embeddings handed to the cluster at shutdown through the object store tier, and
 * taken over by whichever instance a later call for them reaches.
 */
@Module({
  imports: [CacheModule, MetaRegistryModule, RequestsModule, RoutingModule],
  controllers: [HandoffController],
  providers: [EmbeddingHandoff],
  exports: [EmbeddingHandoff],
})
export class HandoffModule {
  constructor(phases: ShutdownPhases, handoff: EmbeddingHandoff, router: OwnerRouter) {
    if (!handoff.enabled) return;
    // Calls for an embedding handed to the store are taken over here (owner routing).
    router.useStoredOwners(handoff);
    phases.on('hand-off', 'staged embeddings', () => handoff.drain());
  }
}
