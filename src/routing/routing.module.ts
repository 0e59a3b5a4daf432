import { Module } from '@nestjs/common';
import { Clock } from '../common/clock';
import { LifecycleEvents } from '../common/lifecycle-events';
import { Readiness } from '../common/readiness';
import { AppConfig } from '../config/app-config';
import { ProcessRole } from '../config/process-role';
import { BucketKeeper } from '../jetstream/bucket-keeper';
import { ShutdownPhases } from '../common/shutdown-phases';
import { EpdNatsServer } from '../transport/epd-nats.server';
import { MetaRegistryModule } from '../meta-registry/meta-registry.module';
import { InstanceRoster } from './instance-roster.service';
import { InstancesController } from './instances.controller';
import { OwnerRouter } from './owner-router.service';

/**
 * Many instances on one shared metadata store: the roster of live instances, and the
 * routing of per-req_id calls to the instance that holds the embedding.
 */
@Module({
  imports: [MetaRegistryModule],
  controllers: [InstancesController],
  providers: [
    {
      // With a shared store; a DP worker is part of its supervisor's instance, not one itself.
      provide: InstanceRoster,
      inject: [AppConfig, BucketKeeper, Clock, LifecycleEvents, ProcessRole],
      useFactory: (
        config: AppConfig,
        buckets: BucketKeeper,
        clock: Clock,
        events: LifecycleEvents,
        role: ProcessRole,
      ) =>
        new InstanceRoster(
          config,
          buckets,
          clock,
          events,
          config.registry.store === 'jetstream' && !role.worker,
        ),
    },
    OwnerRouter,
  ],
  exports: [OwnerRouter, InstanceRoster],
})
export class RoutingModule {
  constructor(
    phases: ShutdownPhases,
    roster: InstanceRoster,
    readiness: Readiness,
    server: EpdNatsServer,
  ) {
    // A lone instance, or the anchor, never steps out of the queue group (anotherStaysIn).
    server.membership.stepOutWhen(() => roster.anotherStaysIn());
    if (!roster.enabled) return;
    // Peers route calls here by the roster: serve once this instance is in it.
    readiness.require('instance roster', roster.inRoster);
    phases.on('leave-roster', 'instance roster', () => roster.leave());
  }
}
