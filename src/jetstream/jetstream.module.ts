import { Global, Module } from '@nestjs/common';
import { Clock } from '../common/clock';
import { LifecycleEvents } from '../common/lifecycle-events';
import { AppConfig } from '../config/app-config';
import { ProcessRole } from '../config/process-role';
import { BucketKeeper } from './bucket-keeper';
import { ObjectBuckets } from './object-buckets';

/**
 * JetStream as infrastructure: what every shared bucket needs whoever owns its data. The
 * keeper that makes a deleted bucket again and tells readiness so, and the object store
 * buckets' handles. The object store is one process's: a DP supervisor and its workers
 * (EPD_DP_SIZE > 1) keep their cache in memory.
 */
@Global()
@Module({
  providers: [
    BucketKeeper,
    {
      provide: ObjectBuckets,
      inject: [AppConfig, ProcessRole, BucketKeeper, Clock, LifecycleEvents],
      useFactory: (
        config: AppConfig,
        role: ProcessRole,
        keeper: BucketKeeper,
        clock: Clock,
        events: LifecycleEvents,
      ) =>
        new ObjectBuckets(
          config.cache.store === 'jetstream' && role.single,
          config,
          keeper,
          clock,
          events,
        ),
    },
  ],
  exports: [BucketKeeper, ObjectBuckets],
})
export class JetStreamModule {}
