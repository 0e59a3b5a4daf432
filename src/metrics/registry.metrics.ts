import { Injectable, type OnModuleDestroy } from '@nestjs/common';
import { Counter, Gauge, register, type Metric } from 'prom-client';
import {
  MetaRegistry,
  type RegistryCounters,
  type RegistryStats,
} from '../meta-registry/meta-registry.service';

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
export class RegistryMetrics implements OnModuleDestroy {
  private readonly metrics: Metric[] = [];

  constructor(registry: MetaRegistry) {
    const gauge = (name: string, help: string, read: (s: RegistryStats) => number) =>
      new Gauge({
        name,
        help,
        async collect() {
          this.set(read(await registry.stats()));
        },
      });
    this.metrics.push(
      gauge(
        'epd_registry_entries',
        'Published metadata entries held by the registry',
        (s) => s.entries,
      ),
      gauge('epd_registry_waiters', 'Pending metadata waits', (s) => s.waiters),
      gauge(
        'epd_registry_oldest_entry_age_seconds',
        'Age of the oldest published entry',
        (s) => (s.oldestAgeMs ?? 0) / 1000,
      ),
    );
    for (const [key, help] of Object.entries(COUNTERS) as [keyof RegistryCounters, string][]) {
      let last = 0;
      this.metrics.push(
        new Counter({
          name: `epd_registry_${snake(key)}_total`,
          help: `Registry ${help}`,
          async collect() {
            const value = (await registry.stats()).counters[key];
            if (value > last) this.inc(value - last);
            last = value;
          },
        }),
      );
    }
  }

  /** Lets a second app in the same process (tests, benchmarks) register them again. */
  onModuleDestroy(): void {
    for (const m of this.metrics)
      register.removeSingleMetric((m as unknown as { name: string }).name);
  }
}
