import { Injectable } from '@nestjs/common';
import { Gauge } from 'prom-client';
import { OwnedMetrics } from '../metrics/owned-metrics';
import { EncodeCache } from './encode-cache.service';

/** The embedding cache, read at scrape time. */
@Injectable()
export class CacheMetrics extends OwnedMetrics {
  constructor(cache: EncodeCache) {
    super();
    const store = cache.store;
    this.ownTotals(
      'epd_cache_lookups_total',
      'Cache lookups per unit (an image, or a whole video or audio request) by outcome: hit, miss (encoded here), join (another request of this process was encoding it)',
      'outcome',
      () => {
        const { hits, misses, joins } = store.stats;
        return { hit: hits, miss: misses, join: joins };
      },
    );
    this.ownTotals(
      'epd_cache_evictions_total',
      'Entries evicted to keep the cache within EPD_CACHE_MAX_BYTES',
      undefined,
      () => ({ evictions: store.stats.evictions }),
    );
    this.own(
      new Gauge({
        name: 'epd_cache_bytes',
        help: 'Bytes of cached embeddings (EPD_CACHE_MAX_BYTES bounds it)',
        collect() {
          this.set(store.bytes);
        },
      }),
    );
    this.own(
      new Gauge({
        name: 'epd_cache_entries',
        help: 'Cached embeddings',
        collect() {
          this.set(store.count);
        },
      }),
    );
  }
}
