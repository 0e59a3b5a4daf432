import { Global, Module } from '@nestjs/common';
import { ShutdownPhases } from '../common/shutdown-phases';
import { MetaRegistryModule } from '../meta-registry/meta-registry.module';
import { RequestsModule } from '../requests/requests.module';
import { RoutingModule } from '../routing/routing.module';
import { EmbeddingHandoff } from './embedding-handoff.service';
import { StoredOwners } from '../routing/stored-owners';
import { HandoffController } from './handoff.controller';
import { HandoffMetrics } from './handoff.metrics';
import { StagedStore } from './staged-store';

/**
 * Staged embeddings handed to the cluster at shutdown through their own object store
 * bucket (StagedStore), and taken over by whichever instance a later call for them
 * reaches: owner routing reaches them as this module's StoredOwners (global, as
 * NoStoredOwnersModule is in a process without the handoff, so that routing, which this
 * module imports, need not import it back).
 */
@Global()
@Module({
  imports: [MetaRegistryModule, RequestsModule, RoutingModule],
  controllers: [HandoffController],
  providers: [
    EmbeddingHandoff,
    StagedStore,
    HandoffMetrics,
    { provide: StoredOwners, useExisting: EmbeddingHandoff },
  ],
  exports: [EmbeddingHandoff, StoredOwners],
})
export class HandoffModule {
  constructor(phases: ShutdownPhases, handoff: EmbeddingHandoff) {
    if (handoff.enabled) phases.on('hand-off', 'staged embeddings', () => handoff.drain());
  }
}
