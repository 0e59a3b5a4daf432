import { Module, type DynamicModule, type Provider, type Type } from '@nestjs/common';
import type { DpRole } from '../config/process-role';
import { DeliveryModule } from '../delivery/delivery.module';
import { RequestsModule } from '../requests/requests.module';
import { MetaRegistryModule } from '../meta-registry/meta-registry.module';
import { RoutingModule } from '../routing/routing.module';
import { AdminController } from './admin.controller';
import { AdminReports } from './admin-reports.service';
import { RequestsAdminController } from './requests-admin.controller';
import { DpRequestsReport, LocalRequestsReport, RequestsReport } from './requests-report';

/**
 * REST admin over the registry and request state; `encoderSide` adds what it exports.
 * The role (decided by the composition root) picks where GET /admin/requests reads: this
 * process, or each DP rank; a DP worker also reports its own to its supervisor.
 */
@Module({})
export class AdminModule {
  static for(encoderSide: Type, role: DpRole): DynamicModule {
    const report: Provider[] =
      role === 'supervisor'
        ? [{ provide: RequestsReport, useClass: DpRequestsReport }]
        : [LocalRequestsReport, { provide: RequestsReport, useExisting: LocalRequestsReport }];
    return {
      module: AdminModule,
      imports: [MetaRegistryModule, RequestsModule, DeliveryModule, RoutingModule, encoderSide],
      controllers: [AdminController, RequestsAdminController],
      providers: [...report, ...(role === 'worker' ? [AdminReports] : [])],
    };
  }
}
