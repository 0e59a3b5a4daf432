import { Injectable } from '@nestjs/common';
import { OwnedMetrics } from '../metrics/owned-metrics';
import { EncodeCache } from './encode-cache.service';

/** The embedding cache, read at scrape time. */
@Injectable()
export class CacheMetrics extends OwnedMetrics {
  constructor(cache: EncodeCache) {
    super();
    const store = cache.store;
    this.ownTotals('epd_encoder_cache_lookups_total', () => {
      const { hits, misses, joins, remoteJoins } = store.stats;
      return { hit: hits, miss: misses, join: joins, remote_join: remoteJoins };
    });
    this.ownTotals('epd_encoder_cache_claim_takeovers_total', () => ({
      takeovers: store.stats.takeovers,
    }));
    this.ownTotals('epd_encoder_cache_peer_fetches_total', () => {
      const { served, fetched, unusable } = cache.peer?.stats ?? {
        served: 0,
        fetched: 0,
        unusable: 0,
      };
      return { served, fetched, unusable };
    });
    this.ownTotals('epd_encoder_cache_evictions_total', () => ({
      evictions: store.stats.evictions,
    }));
    this.gauge('epd_encoder_cache_bytes', () => store.bytes);
    this.gauge('epd_encoder_cache_entries', () => store.count);
  }
}
