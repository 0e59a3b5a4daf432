import { Module, type DynamicModule, type Type } from '@nestjs/common';
import { DeliveryModule } from '../delivery/delivery.module';
import { RequestsModule } from '../requests/requests.module';
import { MetaRegistryModule } from '../meta-registry/meta-registry.module';
import { RoutingModule } from '../routing/routing.module';
import { AdminController } from './admin.controller';
import { AdminReports } from './admin-reports.service';
import { RequestsAdminController } from './requests-admin.controller';

/** REST admin over the registry and request state; `encoderSide` adds what it exports. */
@Module({})
export class AdminModule {
  static for(encoderSide: Type): DynamicModule {
    return {
      module: AdminModule,
      imports: [MetaRegistryModule, RequestsModule, DeliveryModule, RoutingModule, encoderSide],
      controllers: [AdminController, RequestsAdminController],
      providers: [AdminReports],
    };
  }
}
