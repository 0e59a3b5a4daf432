import { Module } from '@nestjs/common';
import { DeliveryModule } from '../delivery/delivery.module';
import { EncoderModule } from '../encoder/encoder.module';
import { RequestsModule } from '../requests/requests.module';
import { MetaRegistryModule } from '../meta-registry/meta-registry.module';
import { AdminController } from './admin.controller';
import { RequestsAdminController } from './requests-admin.controller';
import { WorkersAdminController } from './workers-admin.controller';

@Module({
  imports: [MetaRegistryModule, RequestsModule, DeliveryModule, EncoderModule],
  controllers: [AdminController, RequestsAdminController, WorkersAdminController],
})
export class AdminModule {}
