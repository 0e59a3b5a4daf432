import { Injectable } from '@nestjs/common';
import { Counter, Gauge } from 'prom-client';
import { OwnedMetrics } from '../metrics/owned-metrics';
import { EncodeCache } from './encode-cache.service';

/** The embedding cache, read at scrape time. */
@Injectable()
export class CacheMetrics extends OwnedMetrics {
  constructor(cache: EncodeCache) {
    super();
    const store = cache.store;
    const last = { hits: 0, misses: 0, joins: 0, evictions: 0 };
    this.own(
      new Counter({
        name: 'epd_cache_lookups_total',
        help: 'Cache lookups per unit (an image, or a whole video or audio request) by outcome: hit, miss (encoded here), join (another request of this process was encoding it)',
        labelNames: ['outcome'],
        collect() {
          const now = store.stats;
          for (const k of ['hits', 'misses', 'joins'] as const) {
            this.inc({ outcome: k.slice(0, -1) }, now[k] - last[k]);
            last[k] = now[k];
          }
        },
      }),
    );
    this.own(
      new Counter({
        name: 'epd_cache_evictions_total',
        help: 'Entries evicted to keep the cache within EPD_CACHE_MAX_BYTES',
        collect() {
          const now = store.stats.evictions;
          this.inc(now - last.evictions);
          last.evictions = now;
        },
      }),
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
