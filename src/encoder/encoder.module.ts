import { Module } from '@nestjs/common';
import { CacheModule } from '../cache/cache.module';
import { DeliveryModule } from '../delivery/delivery.module';
import { MediaModule } from '../media/media.module';
import { MetaRegistryModule } from '../meta-registry/meta-registry.module';
import { ProfilingModule } from '../profiling/profiling.module';
import { RequestsModule } from '../requests/requests.module';
import { EncoderBackend } from './backend/encoder-backend';
import { OnnxWorkerBackend } from './backend/onnx-worker.backend';
import { EncoderHealth } from '../health/encoder-health';
import { EncoderController } from './encoder.controller';
import { ProbeEncoderHealth } from './encoder.health';
import { EncodeGateway } from './encode-gateway';
import { LocalEncodeGateway } from './local-encode-gateway';
import { EncoderLoad } from './encoder-load.service';
import { LoadSource } from '../common/load';
import { EncodeAdmission } from './pipeline/encode-admission.service';
import { ADMISSION_PROVIDERS } from './pipeline/admission.providers';
import { WorkBudget } from './pipeline/work-budget';
import { EncodeStages } from './pipeline/encode-stages.service';
import { EmbeddingEncoder } from './pipeline/embedding-encoder.service';
import { EncoderMetrics } from './pipeline/encoder.metrics';
import { EncoderProbe } from './pipeline/encoder-probe.service';
import { EncoderService } from './pipeline/encoder.service';
import { Preprocessor } from './preprocess/preprocessor.service';
import { EncodeScheduler } from './scheduler/encode-scheduler.service';
import { WorkerReports } from './worker-reports.service';
import { LocalRequestsReport } from './local-requests-report';
import { RequestsReport } from '../admin/requests-report';
import { WorkersAdminController } from './workers-admin.controller';

/**
 * Validation, media loading, preprocessing, batching and the model: the encode pipeline,
 * in a single process and in each DP worker (never in a DP supervisor).
 */
@Module({
  imports: [
    MetaRegistryModule,
    RequestsModule,
    DeliveryModule,
    ProfilingModule,
    MediaModule,
    CacheModule,
  ],
  controllers: [EncoderController, WorkersAdminController],
  providers: [
    Preprocessor,
    { provide: EncoderBackend, useClass: OnnxWorkerBackend },
    EncodeScheduler,
    EncoderMetrics,
    EncoderProbe,
    ...ADMISSION_PROVIDERS,
    EncodeAdmission,
    { provide: LoadSource, useClass: EncoderLoad },
    EncodeStages,
    EmbeddingEncoder,
    EncoderService,
    WorkerReports,
    LocalRequestsReport,
    { provide: RequestsReport, useExisting: LocalRequestsReport },
    { provide: EncodeGateway, useClass: LocalEncodeGateway },
    { provide: EncoderHealth, useClass: ProbeEncoderHealth },
  ],
  exports: [
    EncoderHealth,
    EncodeAdmission,
    WorkBudget,
    EncoderBackend,
    RequestsReport,
    LoadSource,
    EncodeGateway,
  ],
})
export class EncoderModule {}
