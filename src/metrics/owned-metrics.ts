import type { OnModuleDestroy } from '@nestjs/common';
import { Counter, Gauge, Histogram, register, type Metric } from 'prom-client';
import { COUNT_BUCKETS, LATENCY_BUCKETS, family, type MetricName } from './catalogue';

type Reading<T> = T | undefined | Promise<T | undefined>;

/**
 * Base for providers that register prom-client metrics on the default registry (the one
 * /metrics serves) and remove them when the app closes, so that a second app in the same
 * process (tests, benchmarks) can register them again. Names, help and labels come from
 * the catalogue (catalogue.ts).
 */
export abstract class OwnedMetrics implements OnModuleDestroy {
  private readonly owned: string[] = [];

  protected own<M extends Metric | { readonly name: string }>(metric: M): M {
    this.owned.push((metric as unknown as { name: string }).name);
    return metric;
  }

  protected counter(name: MetricName): Counter {
    return this.own(new Counter(family(name)));
  }

  protected histogram(name: MetricName, buckets: number[] = LATENCY_BUCKETS): Histogram {
    return this.own(new Histogram({ ...family(name), buckets }));
  }

  /** An info gauge: 1 for each label set, fixed at start (`epd_encoder_model_info`). */
  protected info(name: MetricName, labelSets: readonly Record<string, string>[]): void {
    const g = this.own(new Gauge(family(name)));
    for (const labels of labelSets) g.set(labels, 1);
  }

  /** A histogram of counts (items, requests): buckets 1..64. */
  protected countHistogram(name: MetricName, buckets: number[] = COUNT_BUCKETS): Histogram {
    return this.histogram(name, buckets);
  }

  /**
   * A gauge set at scrape time by `read`: one value, or one per label value. When `read`
   * has nothing (undefined: the store behind it cannot answer), the last value stands.
   */
  protected gauge(name: MetricName, read: () => Reading<number | Record<string, number>>): void {
    const spec = family(name);
    const label = spec.labelNames[0];
    this.own(
      new Gauge({
        ...spec,
        async collect() {
          const value = await read();
          if (value === undefined) return;
          if (typeof value === 'number') this.set(value);
          else for (const [v, n] of Object.entries(value)) this.set({ [label!]: v }, n);
        },
      }),
    );
  }

  /**
   * A counter of running totals the service keeps as plain integers (the hot path pays
   * nothing for Prometheus): each scrape adds what each total grew by since the last one.
   * `read` gives the totals by the family's one label value; without a label, under any
   * one key.
   */
  protected ownTotals(name: MetricName, read: () => Reading<Record<string, number>>): void {
    const spec = family(name);
    const label = spec.labelNames[0];
    const last = new Map<string, number>();
    this.own(
      new Counter({
        ...spec,
        async collect() {
          for (const [value, total] of Object.entries((await read()) ?? {})) {
            // Also by 0: every series exists from the first scrape on.
            const grew = total - (last.get(value) ?? 0);
            if (grew >= 0) {
              if (label) this.inc({ [label]: value }, grew);
              else this.inc(grew);
            }
            last.set(value, total);
          }
        },
      }),
    );
  }

  onModuleDestroy(): void {
    for (const name of this.owned) register.removeSingleMetric(name);
  }
}
