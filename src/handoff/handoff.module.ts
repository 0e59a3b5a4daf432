import { Module } from '@nestjs/common';
import { ShutdownPhases } from '../common/shutdown-phases';
import { MetaRegistryModule } from '../meta-registry/meta-registry.module';
import { RequestsModule } from '../requests/requests.module';
import { RoutingModule } from '../routing/routing.module';
import { EmbeddingHandoff } from './embedding-handoff.service';
import { OwnerRouter } from '../routing/owner-router.service';
import { HandoffController } from './handoff.controller';
import { HandoffMetrics } from './handoff.metrics';
import { StagedStore } from './staged-store';

/**
 * Staged embeddings handed to the cluster at shutdown through their own object store
 * bucket (StagedStore), and taken over by whichever instance a later call for them reaches.
 */
@Module({
  imports: [MetaRegistryModule, RequestsModule, RoutingModule],
  controllers: [HandoffController],
  providers: [EmbeddingHandoff, StagedStore, HandoffMetrics],
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
