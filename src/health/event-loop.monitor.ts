import { Injectable, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';

/** Event-loop delay (p99 over the last second), sampled by Node's own histogram. */
@Injectable()
export class EventLoopMonitor implements OnModuleInit, OnModuleDestroy {
  private histogram?: IntervalHistogram;
  private timer?: NodeJS.Timeout;
  private lagMs = 0;

  onModuleInit(): void {
    this.histogram = monitorEventLoopDelay({ resolution: 10 });
    this.histogram.enable();
    this.timer = setInterval(() => {
      if (!this.histogram) return;
      this.lagMs = this.histogram.percentile(99) / 1e6;
      this.histogram.reset();
    }, 1000);
    this.timer.unref();
  }

  onModuleDestroy(): void {
    clearInterval(this.timer);
    this.histogram?.disable();
  }

  get p99LagMs(): number {
    return this.lagMs;
  }
}
