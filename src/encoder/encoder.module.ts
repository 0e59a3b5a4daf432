import { Module } from '@nestjs/common';
import { DeliveryModule } from '../delivery/delivery.module';
import { MediaModule } from '../media/media.module';
import { MetaRegistryModule } from '../meta-registry/meta-registry.module';
import { ProfilingModule } from '../profiling/profiling.module';
import { RequestsModule } from '../requests/requests.module';
import { EncoderBackend } from './backend/encoder-backend';
import { OnnxWorkerBackend } from './backend/onnx-worker.backend';
import { EncoderController } from './encoder.controller';
import { EncodeAdmission } from './pipeline/encode-admission.service';
import { EncodeStages } from './pipeline/encode-stages.service';
import { EncoderMetrics } from './pipeline/encoder.metrics';
import { EncoderProbe } from './pipeline/encoder-probe.service';
import { EncoderService } from './pipeline/encoder.service';
import { Preprocessor } from './preprocess/preprocessor.service';
import { EncodeScheduler } from './scheduler/encode-scheduler.service';

/** Validation, media loading, preprocessing, batching and the model: the encode pipeline. */
@Module({
  imports: [MetaRegistryModule, RequestsModule, DeliveryModule, ProfilingModule, MediaModule],
  controllers: [EncoderController],
  providers: [
    Preprocessor,
    { provide: EncoderBackend, useClass: OnnxWorkerBackend },
    EncodeScheduler,
    EncoderMetrics,
    EncoderProbe,
    EncodeAdmission,
    EncodeStages,
    EncoderService,
  ],
  exports: [EncodeAdmission, EncoderProbe, EncodeScheduler],
})
export class EncoderModule {}
