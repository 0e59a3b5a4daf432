import { Module } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
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
      inject: [AppConfig],
      useFactory: (config: AppConfig): MetaStore => {
        if (config.registry.store === 'jetstream') {
          throw new Error(
            'registry.store (EPD_REGISTRY_STORE): "jetstream" is not available in this build; use "memory"',
          );
        }
        return new MemoryMetaStore(config.registry.maxEntries);
      },
    },
    MetaRegistry,
    MetadataService,
  ],
  exports: [MetaRegistry, MetadataService],
})
export class MetaRegistryModule {}
