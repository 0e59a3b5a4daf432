import type { OnModuleDestroy } from '@nestjs/common';
import { Counter, register, type Metric } from 'prom-client';

/**
 * Base for providers that register prom-client metrics on the default registry (the one
 * /metrics serves) and remove them when the app closes, so that a second app in the same
 * process (tests, benchmarks) can register them again.
 */
export abstract class OwnedMetrics implements OnModuleDestroy {
  private readonly owned: string[] = [];

  protected own<M extends Metric>(metric: M): M {
    this.owned.push((metric as unknown as { name: string }).name);
    return metric;
  }

  /**
   * A counter of running totals the service keeps as plain integers (the hot path pays
   * nothing for Prometheus): each scrape adds what each total grew by since the last one.
   * `read` gives the totals by label value; without a label, under any one key.
   */
  protected ownTotals(
    name: string,
    help: string,
    label: string | undefined,
    read: () => Record<string, number>,
  ): void {
    const last = new Map<string, number>();
    this.own(
      new Counter({
        name,
        help,
        labelNames: label ? [label] : [],
        collect() {
          for (const [value, total] of Object.entries(read())) {
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
