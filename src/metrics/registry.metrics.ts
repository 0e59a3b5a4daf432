import { Injectable } from '@nestjs/common';
import { Counter, Gauge } from 'prom-client';
import {
  MetaRegistry,
  type RegistryCounters,
  type RegistryStats,
} from '../meta-registry/meta-registry.service';
import { OwnedMetrics } from './owned-metrics';

const COUNTERS: Record<keyof RegistryCounters, string> = {
  publishes: 'metadata publishes',
  errorPublishes: 'publishes of {error} metadata',
  waits: 'metadata waits started',
  resolved: 'waits answered with published metadata or error',
  timeouts: 'waits that reached their deadline (504)',
  cancelled: 'waits cancelled by the caller',
  rejected: 'waits refused at admission (bound reached or shutting down)',
  failed: 'waits failed by shutdown or a store error',
  discards: 'entries discarded by release or admin',
  expired: 'entries dropped by the TTL sweep',
};

const snake = (key: string) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/**
 * Registry metrics read at scrape time from MetaRegistry.stats() (O(1)), so the hot path
 * only bumps plain integers and pays nothing for Prometheus.
 */
@Injectable()
export class RegistryMetrics extends OwnedMetrics {
  private last?: RegistryStats;
  private reading?: { at: number; stats: Promise<RegistryStats | undefined> };

  constructor(private readonly registry: MetaRegistry) {
    super();
    const stats = () => this.stats();
    const gauge = (name: string, help: string, read: (s: RegistryStats) => number) =>
      this.own(
        new Gauge({
          name,
          help,
          async collect() {
            const s = await stats();
            if (s) this.set(read(s));
          },
        }),
      );
    gauge(
      'epd_registry_entries',
      'Published metadata entries held by the registry',
      (s) => s.entries,
    );
    gauge('epd_registry_waiters', 'Pending metadata waits', (s) => s.waiters);
    gauge(
      'epd_registry_oldest_entry_age_seconds',
      'Age of the oldest published entry',
      (s) => (s.oldestAgeMs ?? 0) / 1000,
    );
    for (const [key, help] of Object.entries(COUNTERS) as [keyof RegistryCounters, string][]) {
      let last = 0;
      this.own(
        new Counter({
          name: `epd_registry_${snake(key)}_total`,
          help: `Registry ${help}`,
          async collect() {
            const value = (await stats())?.counters[key] ?? last;
            if (value > last) this.inc(value - last);
            last = value;
          },
        }),
      );
    }
  }

  /**
   * One registry read per scrape, shared by every metric above (a shared store answers it
   * with a bucket status call). When the store cannot answer (NATS down), the last values
   * stand: /metrics itself must keep working, since it is how the outage is seen.
   */
  private stats(): Promise<RegistryStats | undefined> {
    const now = Date.now();
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
