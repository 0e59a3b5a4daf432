import { Clock } from '../common/clock';
import { Injectable } from '@nestjs/common';
import {
  MetaRegistry,
  type RegistryCounters,
  type RegistryStats,
} from '../meta-registry/meta-registry.service';
import type { WaitOutcome } from '../common/kernel';
import { LifecycleEvents } from '../common/lifecycle-events';
import { family, LATENCY_BUCKETS, type MetricName } from './catalogue';
import { PlainHistogram } from './plain-histogram';
import { OwnedMetrics } from './owned-metrics';

/** The `event` label of epd_encoder_registry_events_total, per registry counter. */
const EVENTS: Record<keyof RegistryCounters, string> = {
  publishes: 'publish',
  errorPublishes: 'error_publish',
  waits: 'wait',
  resolved: 'resolved',
  timeouts: 'timeout',
  cancelled: 'cancelled',
  rejected: 'rejected',
  failed: 'failed',
  discards: 'discard',
  expired: 'expired',
};

const OUTCOMES: readonly WaitOutcome[] = ['ok', 'timeout', 'error', 'cancelled'];

/**
 * Registry metrics read at scrape time from MetaRegistry.stats() (O(1)), so the hot path
 * only bumps plain integers and pays nothing for Prometheus; and wait_metadata's outcomes
 * and latency, observed as each call ends (a pre-bound child per outcome).
 */
@Injectable()
export class RegistryMetrics extends OwnedMetrics {
  private last?: RegistryStats;
  private reading?: { at: number; stats: Promise<RegistryStats | undefined> };

  constructor(
    private readonly registry: MetaRegistry,
    private readonly clock: Clock,
    events: LifecycleEvents,
  ) {
    super();
    const stats = () => this.stats();
    const gauge = (name: MetricName, read: (s: RegistryStats) => number) =>
      this.gauge(name, async () => {
        const s = await stats();
        return s && read(s);
      });
    gauge('epd_encoder_registry_entries', (s) => s.entries);
    gauge('epd_encoder_registry_waiters', (s) => s.waiters);
    gauge('epd_encoder_registry_oldest_entry_age_seconds', (s) => (s.oldestAgeMs ?? 0) / 1000);
    this.ownTotals('epd_encoder_registry_events_total', async () => {
      const counters = (await stats())?.counters;
      if (!counters) return undefined;
      const out: Record<string, number> = {};
      for (const [key, event] of Object.entries(EVENTS))
        out[event] = counters[key as keyof RegistryCounters];
      return out;
    });

    // On every wait: plain integers, read at scrape time (no label hashing per call).
    const seconds = this.own(
      new PlainHistogram(
        'epd_encoder_wait_metadata_seconds',
        family('epd_encoder_wait_metadata_seconds').help,
        'outcome',
        OUTCOMES,
        LATENCY_BUCKETS,
      ),
    );
    const observe = Object.fromEntries(OUTCOMES.map((o) => [o, seconds.child(o)])) as Record<
      WaitOutcome,
      (s: number) => void
    >;
    const totals: Record<WaitOutcome, number> = { ok: 0, timeout: 0, error: 0, cancelled: 0 };
    this.ownTotals('epd_encoder_wait_metadata_total', () => totals);
    events.on('wait.completed', (outcome, s) => {
      totals[outcome]++;
      observe[outcome](s);
    });
  }

  /**
   * One registry read per scrape, shared by every metric above (a shared store answers it
   * with a bucket status call). When the store cannot answer (NATS down), the last values
   * stand: /metrics itself must keep working, since it is how the outage is seen.
   */
  private stats(): Promise<RegistryStats | undefined> {
    const now = this.clock.now();
    if (!this.reading || now - this.reading.at > 100) {
      this.reading = {
        at: now,
        stats: this.registry.stats().then(
          (s) => (this.last = s),
          () => this.last,
        ),
      };
    }
    return this.reading.stats;
  }
}
