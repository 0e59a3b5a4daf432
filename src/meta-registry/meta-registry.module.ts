import { Module } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { NatsConnectionService } from '../transport/nats-connection.service';
import { JetStreamMetaStore } from './jetstream-meta-store';
import { MemoryMetaStore } from './memory-meta-store';
import { MetaRegistry } from './meta-registry.service';
import { MetaStore } from './meta-store';
import { MetadataController } from './metadata.controller';
import { MetadataService } from './metadata.service';

@Module({
  controllers: [MetadataController],
  providers: [
    {
      provide: MetaStore,
      inject: [AppConfig, NatsConnectionService],
      useFactory: (config: AppConfig, nats: NatsConnectionService): MetaStore =>
        config.registry.store === 'jetstream'
          ? new JetStreamMetaStore(nats, config)
          : new MemoryMetaStore(config.registry.maxEntries),
    },
    MetaRegistry,
    MetadataService,
  ],
  exports: [MetaRegistry, MetadataService],
})
export class MetaRegistryModule {}
