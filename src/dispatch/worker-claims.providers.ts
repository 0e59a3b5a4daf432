import type { Provider } from '@nestjs/common';
import { MemoryClaims } from '../cache/claims';
import { Clock } from '../common/clock';
import { AppConfig } from '../config/app-config';

/**
 * The DP workers' cache claims, held by their supervisor when no shared bucket holds
 * them (the memory store): one owner per content key across ranks. None with the
 * JetStream store (the workers claim in its bucket) or without a cache.
 */
export class WorkerClaims {
  constructor(readonly claims?: MemoryClaims) {}
}

export const WORKER_CLAIMS_PROVIDERS: Provider[] = [
  {
    provide: WorkerClaims,
    inject: [AppConfig, Clock],
    useFactory: (config: AppConfig, clock: Clock) =>
      new WorkerClaims(
        config.cache.maxBytes > 0 && config.registry.store === 'memory'
          ? new MemoryClaims(config.cache.maxClaims, () => clock.now())
          : undefined,
      ),
  },
];
