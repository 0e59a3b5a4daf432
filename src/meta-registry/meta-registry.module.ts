import { Clock } from '../common/clock';
import { LifecycleEvents } from '../common/lifecycle-events';
import { Readiness } from '../common/readiness';
import { ShutdownPhases } from '../common/shutdown-phases';
import { Module } from '@nestjs/common';
import { BucketKeeper } from '../jetstream/bucket-keeper';
import { StoreConfigError } from '../jetstream/bucket-settings';
import { AppConfig } from '../config/app-config';
import { ParentLink } from '../transport/parent-link';
import { JetStreamMetaStore } from './jetstream-meta-store';
import { MemoryMetaStore } from './memory-meta-store';
import { MetaRegistry } from './meta-registry.service';
import { MetaStore } from './meta-store';
import { MetadataController } from './metadata.controller';
import { MetadataService } from './metadata.service';
import { ProcessOwner } from './process-owner';
import { restartMemoryFor, RestartMemory } from './restart-memory';
import { BOOT_ID } from '../common/boot-id';
import { ProcessRole } from '../config/process-role';
import { ParentMirroredStore } from './parent-mirrored-store';

function makeStore(
  config: AppConfig,
  link: ParentLink,
  clock: Clock,
  readiness: Readiness,
  buckets: BucketKeeper,
): MetaStore {
  let store: MetaStore;
  if (config.registry.store === 'jetstream') store = new JetStreamMetaStore(buckets, config, clock);
  // A DP worker mirrors its records to its supervisor; with JetStream, everyone shares the bucket.
  else if (link.channel) store = new ParentMirroredStore(config.registry.maxEntries, link.channel);
  else store = new MemoryMetaStore(config.registry.maxEntries);
  readiness.require('metadata store', store.ready());
  // Its bucket exists with other settings: refused with the other buckets' conflicts (exit 78).
  store.ready().catch((err: unknown) => {
    if (err instanceof StoreConfigError) buckets.refuse(err);
  });
  return store;
}

@Module({
  controllers: [MetadataController],
  providers: [
    {
      provide: MetaStore,
      inject: [AppConfig, ParentLink, Clock, Readiness, BucketKeeper],
      useFactory: makeStore,
    },
    {
      // What this process's records name as their owner, by role.
      provide: ProcessOwner,
      inject: [AppConfig, ProcessRole],
      useFactory: (config: AppConfig, role: ProcessRole) => {
        const instance = config.instance.id;
        if (role.supervisor) return new ProcessOwner({ instance, boot: BOOT_ID });
        if (role.worker)
          return new ProcessOwner({ instance, rank: role.rank, pid: process.pid, boot: BOOT_ID });
        return ProcessOwner.single(instance, role.rank);
      },
    },
    {
      // A DP worker's records live on in its supervisor, which keeps the ledger for them all;
      // a shared store outlives the process.
      provide: RestartMemory,
      inject: [AppConfig, Clock, ProcessRole, MetaStore],
      useFactory: (config: AppConfig, clock: Clock, role: ProcessRole, store: MetaStore) =>
        restartMemoryFor(config, clock, store instanceof MemoryMetaStore && !role.worker),
    },
    MetaRegistry,
    {
      // A single process on a shared store may outlive records of its previous process.
      provide: MetadataService,
      inject: [MetaRegistry, LifecycleEvents, AppConfig, ProcessRole],
      useFactory: (
        registry: MetaRegistry,
        events: LifecycleEvents,
        config: AppConfig,
        role: ProcessRole,
      ) =>
        new MetadataService(registry, events, role.single && config.registry.store === 'jetstream'),
    },
  ],
  exports: [MetaRegistry, MetadataService, MetaStore],
})
export class MetaRegistryModule {
  constructor(phases: ShutdownPhases, registry: MetaRegistry) {
    phases.on('close-registry', 'metadata registry', () => registry.shutdown());
  }
}
