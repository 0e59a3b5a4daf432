import { Module, type DynamicModule } from '@nestjs/common';
import { AdminModule } from './admin/admin.module';
import { CommonModule } from './common/common.module';
import { ErrorsModule } from './common/errors/errors.module';
import type { AppConfig } from './config/app-config';
import { dpRole, ProcessRole } from './config/process-role';
import { ConfigModule } from './config/config.module';
import { DispatchModule } from './dispatch/dispatch.module';
import { EncoderModule } from './encoder/encoder.module';
import { HealthModule } from './health/health.module';
import { LoggingModule } from './logging/logging.module';
import { MetaRegistryModule } from './meta-registry/meta-registry.module';
import { DeliveryModule } from './delivery/delivery.module';
import { MetricsModule } from './metrics/metrics.module';
import { ProfilingModule } from './profiling/profiling.module';
import { RequestsModule } from './requests/requests.module';
import { NoLocalRanksModule } from './routing/local-ranks';
import { NoStoredOwnersModule } from './routing/stored-owners';
import { SglangModule } from './sglang/sglang.module';
import { HandoffModule } from './handoff/handoff.module';
import { ScalingModule } from './scaling/scaling.module';
import { TransportModule } from './transport/transport.module';
import { JetStreamModule } from './jetstream/jetstream.module';
import { TracingFlush } from './tracing/tracing.lifecycle';
import { VllmModule, VllmProxyModule } from './vllm/vllm.module';

/**
 * The whole service, on a config loaded once by whoever creates it (main.ts or a test).
 * The encoder side is the encode pipeline itself (one process, or a DP worker), or, in a
 * DP supervisor (EPD_DP_SIZE > 1), dispatch to the workers that run it.
 */
@Module({})
export class AppModule {
  static withConfig(config: AppConfig): DynamicModule {
    const role = dpRole(config);
    const encoderSide = role === 'supervisor' ? DispatchModule : EncoderModule;
    return {
      module: AppModule,
      imports: [
        ConfigModule.withConfig(config, new ProcessRole(role, config.encoder.dpRank)),
        CommonModule,
        LoggingModule,
        ErrorsModule,
        TransportModule,
        JetStreamModule,
        MetaRegistryModule,
        RequestsModule,
        DeliveryModule,
        ...(role === 'supervisor' ? [] : [ProfilingModule, NoLocalRanksModule]),
        encoderSide,
        HealthModule.for(encoderSide),
        AdminModule.for(encoderSide),
        MetricsModule.for(role),
        SglangModule,
        VllmProxyModule,
        // The autoscaling signal, once per instance (a DP worker is part of its supervisor's).
        ...(role === 'worker' ? [] : [ScalingModule.for(encoderSide)]),
        // Staged embeddings that outlive the process (EPD_CACHE_STORE=jetstream): one process only.
        ...(role === 'single' ? [HandoffModule] : [NoStoredOwnersModule]),
        // vLLM's encode-instance face reads this process's staged embeddings: one process only.
        ...(role === 'single' ? [VllmModule] : []),
      ],
      providers: [TracingFlush],
    };
  }
}
