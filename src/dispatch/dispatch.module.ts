import { RequestsReport } from '../admin/requests-report';
import { DpRequestsReport } from './dp-requests-report';
import { Global, Module } from '@nestjs/common';
import { EncoderHealth } from '../health/encoder-health';
import { MetaRegistryModule } from '../meta-registry/meta-registry.module';
import { RequestsModule } from '../requests/requests.module';
import { ProfileControl } from '../profiling/profile-control';
import { ProfilingController } from '../profiling/profiling.controller';
import { LocalRanks } from '../routing/local-ranks';
import { EncodeGateway } from '../encoder/encode-gateway';
import { EncoderController } from '../encoder/encoder.controller';
import { DispatchAdminController } from './dispatch-admin.controller';
import { DpEncodeGateway } from './dp-encode-gateway';
import { DispatchMetrics } from './dispatch.metrics';
import { DpDispatcher } from './dp-dispatcher.service';
import { DpProfileControl } from './dp-profile-control';
import { WorkersHealth } from './workers.health';
import { WorkerSupervisor } from './worker-supervisor.service';
import { DpLoad } from './dp-load';
import { WORKER_CLAIMS_PROVIDERS } from './worker-claims.providers';
import { LoadSource } from '../common/load';

/**
 * DP (EPD_DP_SIZE > 1), in the supervisor: the worker processes, dispatch and admission,
 * worker death and respawn, broadcasts, and the workers' health. Global because its
 * LocalRanks is one more kind of owner for owner routing, which every feature uses.
 */
@Global()
@Module({
  imports: [MetaRegistryModule, RequestsModule],
  controllers: [EncoderController, DispatchAdminController, ProfilingController],
  providers: [
    ...WORKER_CLAIMS_PROVIDERS,
    WorkerSupervisor,
    DpDispatcher,
    DispatchMetrics,
    { provide: LocalRanks, useExisting: DpDispatcher },
    { provide: RequestsReport, useClass: DpRequestsReport },
    { provide: EncoderHealth, useClass: WorkersHealth },
    { provide: ProfileControl, useClass: DpProfileControl },
    { provide: EncodeGateway, useClass: DpEncodeGateway },
    { provide: LoadSource, useClass: DpLoad },
  ],
  exports: [LocalRanks, EncoderHealth, RequestsReport, LoadSource],
})
export class DispatchModule {}
