import type { Provider } from '@nestjs/common';
import { Clock } from '../common/clock';
import { AppConfig } from '../config/app-config';
import { BucketKeeper } from '../jetstream/bucket-keeper';
import { ParentLink } from '../transport/parent-link';
import type { CacheClaims } from './claims';
import { KvClaims } from './kv-claims';
import { ParentClaims } from './parent-claims';

/**
 * The cache's single flight across processes, as the store and the role allow it: over
 * the shared KV bucket (EPD_REGISTRY_STORE=jetstream), over the DP supervisor's IPC
 * channel (a DP worker), or none (a process alone, or no cache: EPD_CACHE_MAX_BYTES 0).
 */
export class ClusterClaims {
  constructor(
    readonly kind: 'jetstream' | 'dp_supervisor' | 'in_process',
    readonly claims?: CacheClaims,
  ) {}
}

export const CLAIMS_PROVIDERS: Provider[] = [
  {
    provide: ClusterClaims,
    inject: [AppConfig, BucketKeeper, ParentLink, Clock],
    useFactory: (config: AppConfig, buckets: BucketKeeper, link: ParentLink, clock: Clock) => {
      if (config.cache.maxBytes <= 0) return new ClusterClaims('in_process');
      if (config.registry.store === 'jetstream') {
        const { kvBucket, kvReplicas } = config.registry;
        return new ClusterClaims(
          'jetstream',
          new KvClaims(
            buckets,
            `${kvBucket}_claims`,
            { replicas: kvReplicas, maxClaims: config.cache.maxClaims },
            clock,
          ),
        );
      }
      if (link.channel) return new ClusterClaims('dp_supervisor', new ParentClaims(link.channel));
      return new ClusterClaims('in_process');
    },
  },
];
