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
      'Cache lookups per unit (an image, or a whole video or audio request) by outcome: hit, miss (encoded here), join (another request of this process was encoding it), remote_join (another process owned it: its rows were fetched)',
      'outcome',
      () => {
        const { hits, misses, joins, remoteJoins } = store.stats;
        return { hit: hits, miss: misses, join: joins, remote_join: remoteJoins };
      },
    );
    this.ownTotals(
      'epd_cache_claim_takeovers_total',
      'Claims taken over from an owner that was gone, silent for a lease, or no longer had the entry (that unit was encoded here)',
      undefined,
      () => ({ takeovers: store.stats.takeovers }),
    );
    this.ownTotals(
      'epd_cache_peer_fetches_total',
      'Rows moved between processes for single flight: served (to a joiner elsewhere), fetched (from an owner elsewhere), unusable (the owner could not serve)',
      'outcome',
      () => {
        const { served, fetched, unusable } = cache.peer?.stats ?? {
          served: 0,
          fetched: 0,
          unusable: 0,
        };
        return { served, fetched, unusable };
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
