import { Module } from '@nestjs/common';
import { LocalReqIds } from '../routing/owner-routed';
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
  providers: [
    ReqStateStore,
    RequestLifecycle,
    { provide: LocalReqIds, useExisting: ReqStateStore },
  ],
  exports: [ReqStateStore, RequestLifecycle, LocalReqIds],
})
export class RequestsModule {}
