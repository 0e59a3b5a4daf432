import { Module } from '@nestjs/common';
import { RoutingModule } from '../routing/routing.module';
import { RequestsModule } from '../requests/requests.module';
import { TransferModule } from '../transfer/transfer.module';
import { DeliveryController } from './delivery.controller';
import { DeliveryMetrics } from './delivery.metrics';
import { DeliveryService } from './delivery.service';
import { DestinationPolicy } from './destination-policy';
import { DeliveryWire } from './delivery-wire';

/** Getting staged embeddings to receivers: destinations, receive_count, acks. */
@Module({
  imports: [RequestsModule, TransferModule, RoutingModule],
  controllers: [DeliveryController],
  providers: [DeliveryService, DeliveryWire, DestinationPolicy, DeliveryMetrics],
  exports: [DeliveryService, DestinationPolicy],
})
export class DeliveryModule {}
