import { Injectable } from '@nestjs/common';
import { HealthIndicatorService, type HealthIndicatorResult } from '@nestjs/terminus';
import { withTimeout } from '../common/timeout';
import { AppConfig } from '../config/app-config';
import { MetaRegistry } from '../meta-registry/meta-registry.service';
import { NatsConnectionService } from '../transport/nats-connection.service';
import { EncoderHealth } from './encoder-health';
import { EventLoopMonitor } from './event-loop.monitor';

/**
 * Indicators over state the process already has: the shared NATS connection (one PING,
 * never a new connection per probe), the registry's bounds, and event-loop delay.
 */
@Injectable()
export class HealthIndicators {
  constructor(
    private readonly indicator: HealthIndicatorService,
    private readonly nats: NatsConnectionService,
    private readonly registry: MetaRegistry,
    private readonly loop: EventLoopMonitor,
    private readonly config: AppConfig,
    private readonly encoderHealth: EncoderHealth,
  ) {}

  async natsConnection(): Promise<HealthIndicatorResult> {
    const check = this.indicator.check('nats');
    const nc = this.nats.current;
    const state = this.nats.state;
    if (!nc || state !== 'connected') {
      return check.down({ state, error: this.nats.lastErrorMessage || 'not connected' });
    }
    try {
      const ms = this.config.health.natsRttTimeoutMs;
      const rtt = await withTimeout(
        nc.rtt(),
        ms,
        () => new Error(`NATS ping took longer than ${ms} ms`),
      );
      return check.up({ state, server: nc.getServer(), rtt_ms: Math.round(rtt * 1000) / 1000 });
    } catch (err) {
      return check.down({ state, error: (err as Error).message });
    }
  }

  async registryBounds(): Promise<HealthIndicatorResult> {
    const check = this.indicator.check('registry');
    const store = this.config.registry.store;
    let s;
    try {
      s = await this.registry.stats();
    } catch (err) {
      // A shared store that is unreachable or not open yet (EPD_REGISTRY_STORE=jetstream).
      return check.down({ store, error: (err as Error).message });
    }
    const data = {
      store,
      entries: s.entries,
      max_entries: s.maxEntries,
      waiters: s.waiters,
      max_waiters: s.maxWaiters,
    };
    if (this.registry.isClosed) return check.down({ ...data, error: 'shutting down' });
    if (s.entries >= s.maxEntries || s.waiters >= s.maxWaiters) {
      return check.down({ ...data, error: 'at capacity' });
    }
    return check.up(data);
  }

  /** Whether this encoder can encode (EncoderHealth: a probe, or the DP workers alive). */
  async encoder(): Promise<HealthIndicatorResult> {
    const check = this.indicator.check('encoder');
    const report = await this.encoderHealth.check();
    return report.up ? check.up(report.data) : check.down(report.data);
  }

  /** The cheap half: models loaded (or DP workers alive), without running a forward. */
  encoderLoaded(): HealthIndicatorResult {
    const check = this.indicator.check('encoder');
    const report = this.encoderHealth.loaded();
    return report.up ? check.up(report.data) : check.down(report.data);
  }

  eventLoop(): HealthIndicatorResult {
    const check = this.indicator.check('event_loop');
    const lag = Math.round(this.loop.p99LagMs * 10) / 10;
    const max = this.config.health.maxEventLoopLagMs;
    return lag > max
      ? check.down({ p99_lag_ms: lag, max_lag_ms: max })
      : check.up({ p99_lag_ms: lag });
  }
}
