import { Module, type DynamicModule, type Type } from '@nestjs/common';
import { DeliveryModule } from '../delivery/delivery.module';
import { RequestsModule } from '../requests/requests.module';
import { MetaRegistryModule } from '../meta-registry/meta-registry.module';
import { RoutingModule } from '../routing/routing.module';
import { AdminController } from './admin.controller';
import { RequestsAdminController } from './requests-admin.controller';

/**
 * REST admin over the registry and request state; `encoderSide` (the encode pipeline, or
 * DP dispatch) adds what it exports, GET /admin/requests's RequestsReport among them.
 */
@Module({})
export class AdminModule {
  static for(encoderSide: Type): DynamicModule {
    return {
      module: AdminModule,
      imports: [MetaRegistryModule, RequestsModule, DeliveryModule, RoutingModule, encoderSide],
      controllers: [AdminController, RequestsAdminController],
    };
  }
}
