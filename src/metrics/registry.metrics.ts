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
  constructor(registry: MetaRegistry) {
    super();
    const gauge = (name: string, help: string, read: (s: RegistryStats) => number) =>
      this.own(
        new Gauge({
          name,
          help,
          async collect() {
            this.set(read(await registry.stats()));
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
            const value = (await registry.stats()).counters[key];
            if (value > last) this.inc(value - last);
            last = value;
          },
        }),
      );
    }
  }
}
