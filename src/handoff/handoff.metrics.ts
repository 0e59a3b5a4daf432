import { Injectable } from '@nestjs/common';
import { OwnedMetrics } from '../metrics/owned-metrics';
import { StagedStore } from './staged-store';

/** The handoff's staged bucket, read at scrape time. */
@Injectable()
export class HandoffMetrics extends OwnedMetrics {
  constructor(store: StagedStore) {
    super();
    this.ownTotals('epd_encoder_object_store_handoffs_total', () => {
      const { written, failed, read, deleted } = store.stats();
      return { written, failed, taken: read, deleted };
    });
  }
}
