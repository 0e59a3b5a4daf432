import { Module } from '@nestjs/common';
import { MetaRegistryModule } from '../meta-registry/meta-registry.module';
import { EncoderBackend } from './backend/encoder-backend';
import { OnnxWorkerBackend } from './backend/onnx-worker.backend';
import { TransferModule } from '../transfer/transfer.module';
import { DeliveryService } from './delivery.service';
import { EncodeScheduler } from './encode-scheduler.service';
import { EncoderHttpController } from './encoder-http.controller';
import { EncoderMetrics } from './encoder.metrics';
import { EncoderProbe } from './encoder-probe.service';
import { EncoderService } from './encoder.service';
import { MediaLoader } from './media/media-loader.service';
import { Preprocessor } from './preprocess/preprocessor.service';
import { ProfilerService } from './profiler.service';
import { ReqStateStore } from './req-state.store';
import { RequestLifecycle } from './request-lifecycle.service';

@Module({
  imports: [MetaRegistryModule, TransferModule],
  controllers: [EncoderHttpController],
  providers: [
    MediaLoader,
    Preprocessor,
    { provide: EncoderBackend, useClass: OnnxWorkerBackend },
    EncodeScheduler,
    ReqStateStore,
    EncoderMetrics,
    ProfilerService,
    EncoderProbe,
    RequestLifecycle,
    DeliveryService,
    EncoderService,
  ],
  exports: [
    EncoderService,
    EncoderProbe,
    ProfilerService,
    ReqStateStore,
    EncodeScheduler,
    DeliveryService,
  ],
})
export class EncoderModule {}
