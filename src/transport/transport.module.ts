import { Module } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { EncoderModule } from '../encoder/encoder.module';
import { MetaRegistryModule } from '../meta-registry/meta-registry.module';
import { EncoderController } from './encoder.controller';
import { EpdNatsServer } from './epd-nats.server';
import { MetadataController } from './metadata.controller';
import { NatsConnectionService } from './nats-connection.service';

@Module({
  imports: [MetaRegistryModule, EncoderModule],
  controllers: [MetadataController, EncoderController],
  providers: [
    NatsConnectionService,
    {
      provide: EpdNatsServer,
      inject: [NatsConnectionService, AppConfig],
      useFactory: (nats: NatsConnectionService, config: AppConfig) =>
        new EpdNatsServer(nats, config),
    },
  ],
  exports: [NatsConnectionService, EpdNatsServer],
})
export class TransportModule {}
