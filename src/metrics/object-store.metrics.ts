import { Injectable } from '@nestjs/common';
import { LifecycleEvents } from '../common/lifecycle-events';
import { OwnedMetrics } from './owned-metrics';

/** Object store operations (`object-store.op`), whichever feature's bucket they were on. */
@Injectable()
export class ObjectStoreMetrics extends OwnedMetrics {
  constructor(events: LifecycleEvents) {
    super();
    const seconds = this.histogram('epd_encoder_object_store_seconds');
    events.on('object-store.op', (op, s) => seconds.observe({ op }, s));
  }
}
