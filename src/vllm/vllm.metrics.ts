import { Injectable } from '@nestjs/common';
import { OwnedMetrics } from '../metrics/owned-metrics';
import { EcStore } from './ec-store.service';
import { ProxyRegistrar } from './proxy-registrar.service';

/** vLLM's face: the EC files kept, their writes and evictions, and the proxies that took us. */
@Injectable()
export class VllmMetrics extends OwnedMetrics {
  constructor(store: EcStore, registrar: ProxyRegistrar) {
    super();
    this.gauge('epd_encoder_vllm_ec_files', () => store.stats().files);
    this.gauge('epd_encoder_vllm_ec_bytes', () => store.stats().bytes);
    const c = store.counts;
    this.ownTotals('epd_encoder_vllm_ec_writes_total', () => ({
      ok: c.writesOk,
      failed: c.writesFailed,
    }));
    this.ownTotals('epd_encoder_vllm_ec_evictions_total', () => ({
      ttl: c.evictedTtl,
      budget: c.evictedBudget,
      empty_dir: c.emptyDirsRemoved,
    }));
    this.gauge('epd_encoder_vllm_proxies_registered', () => registrar.registeredCount);
  }
}
