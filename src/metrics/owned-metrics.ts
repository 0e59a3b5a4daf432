import type { OnModuleDestroy } from '@nestjs/common';
import { register, type Metric } from 'prom-client';

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

  onModuleDestroy(): void {
    for (const name of this.owned) register.removeSingleMetric(name);
  }
}
