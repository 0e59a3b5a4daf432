import { Module } from '@nestjs/common';
import { ShutdownPhases } from '../common/shutdown-phases';
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
  constructor(phases: ShutdownPhases, roster: InstanceRoster) {
    if (roster.enabled) phases.on('leave-roster', 'instance roster', () => roster.leave());
  }
}
