import { Module } from '@nestjs/common';
import { EncoderModule } from '../encoder/encoder.module';
import { MediaModule } from '../media/media.module';
import { RequestsModule } from '../requests/requests.module';
import { EcKeys } from './ec-keys.service';
import { EcStore } from './ec-store.service';
import { ProxyRegistrar } from './proxy-registrar.service';
import { VllmAdminController, VllmController } from './vllm.controller';
import { VllmEncodeService } from './vllm-encode.service';
import { VllmMetrics } from './vllm.metrics';

/**
 * Registration with vLLM's disagg proxies, in every process so that the composition root
 * starts it as it starts SGLang's: it announces only with EPD_VLLM_PROXY_URL, which the
 * configuration allows only beside EPD_VLLM_EC_PATH, in one process.
 */
@Module({ providers: [ProxyRegistrar], exports: [ProxyRegistrar] })
export class VllmProxyModule {}

/**
 * vLLM's encode instance (EPD_VLLM_EC_PATH): its chat-completions face, the EC files its
 * consumers read, and registration with its disagg proxy. In one process only: it reads
 * the staged embedding this process's pipeline produced.
 */
@Module({
  imports: [EncoderModule, MediaModule, RequestsModule, VllmProxyModule],
  controllers: [VllmController, VllmAdminController],
  providers: [EcStore, EcKeys, VllmEncodeService, VllmMetrics],
})
export class VllmModule {}
