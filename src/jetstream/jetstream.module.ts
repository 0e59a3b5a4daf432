import { Global, Module } from '@nestjs/common';
import { BucketKeeper } from './bucket-keeper';

/**
 * JetStream as infrastructure: what every shared bucket needs whoever owns its data. For
 * now the keeper that makes a deleted bucket again and tells readiness so.
 */
@Global()
@Module({ providers: [BucketKeeper], exports: [BucketKeeper] })
export class JetStreamModule {}
