import { Global, Module } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { EpdNatsServer } from './epd-nats.server';
import { NatsConnectionService } from './nats-connection.service';

/**
 * The process's one NATS connection and the Nest server on it. Infrastructure only: it
 * imports no feature module; each feature's @MessagePattern handlers live in its own
 * controllers, beside its HTTP routes.
 */
@Global()
@Module({
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
