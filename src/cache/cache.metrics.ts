import { Injectable } from '@nestjs/common';
import { OwnedMetrics } from '../metrics/owned-metrics';
import { EncodeCache } from './encode-cache.service';
import { ObjectTier } from './object-tier';

/** The embedding cache and its second level in the object store, read at scrape time. */
@Injectable()
export class CacheMetrics extends OwnedMetrics {
  constructor(cache: EncodeCache, tier: ObjectTier) {
    super();
    const store = cache.store;
    this.ownTotals('epd_encoder_cache_lookups_total', () => {
      const { hits, misses, joins, remoteJoins, storeHits } = store.stats;
      return {
        hit: hits,
        miss: misses,
        join: joins,
        remote_join: remoteJoins,
        store_hit: storeHits,
      };
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
    this.ownTotals('epd_encoder_object_store_reads_total', () => tier.stats().reads);
    this.ownTotals('epd_encoder_object_store_writes_total', () => tier.stats().writes);
    this.ownTotals('epd_encoder_object_store_bytes_total', () => {
      const { bytes_written, bytes_read } = tier.stats();
      return { written: bytes_written, read: bytes_read };
    });
    this.gauge('epd_encoder_object_store_write_queue', () => tier.stats().queued);
  }
}
