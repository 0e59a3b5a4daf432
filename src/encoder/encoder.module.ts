import { Module } from '@nestjs/common';
import { MetaRegistryModule } from '../meta-registry/meta-registry.module';
import { EncoderBackend } from './backend/encoder-backend';
import { OnnxWorkerBackend } from './backend/onnx-worker.backend';
import { EncodeScheduler } from './encode-scheduler.service';
import { EncoderHttpController } from './encoder-http.controller';
import { EncoderMetrics } from './encoder.metrics';
import { EncoderProbe } from './encoder-probe.service';
import { EncoderService } from './encoder.service';
import { MediaLoader } from './media/media-loader.service';
import { Preprocessor } from './preprocess/preprocessor.service';
import { ProfilerService } from './profiler.service';
import { ReqStateStore } from './req-state.store';

@Module({
  imports: [MetaRegistryModule],
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
    EncoderService,
  ],
  exports: [EncoderService, EncoderProbe, ProfilerService, ReqStateStore, EncodeScheduler],
})
export class EncoderModule {}
