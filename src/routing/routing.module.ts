import { Module } from '@nestjs/common';
import { Readiness } from '../common/readiness';
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
  providers: [InstanceRoster, OwnerRouter],
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
