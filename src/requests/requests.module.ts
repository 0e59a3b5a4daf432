import { Module } from '@nestjs/common';
import { RoutingModule } from '../routing/routing.module';
import { MetaRegistryModule } from '../meta-registry/meta-registry.module';
import { RequestLifecycle } from './request-lifecycle.service';
import { ReqStateStore } from './req-state.store';
import { RequestsController } from './requests.controller';

/**
 * Request state on this worker: one ReqState per active req_id, the staging budget,
 * tombstones, the TTL sweep and the one release path. The encoder, delivery and admin
 * depend on it; it depends on no feature but the metadata registry.
 */
@Module({
  imports: [MetaRegistryModule, RoutingModule],
  controllers: [RequestsController],
  providers: [ReqStateStore, RequestLifecycle],
  exports: [ReqStateStore, RequestLifecycle],
})
export class RequestsModule {}
