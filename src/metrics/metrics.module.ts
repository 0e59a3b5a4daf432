import { Module, type DynamicModule } from '@nestjs/common';
import { ThrottlerModule } from '@nestjs/throttler';
import { PrometheusModule } from '@willsoto/nestjs-prometheus';
import type { DpRole } from '../config/process-role';
import { MetaRegistryModule } from '../meta-registry/meta-registry.module';
import { RoutingModule } from '../routing/routing.module';
import { DpMetricsController, GuardedMetricsController, WorkerMetricsReporter } from './dp-metrics';
import { ObjectStoreMetrics } from './object-store.metrics';
import { RegistryMetrics } from './registry.metrics';
import { RoutingMetrics } from './routing.metrics';
import { TransportMetrics } from './transport.metrics';
import { MetricsGuard } from './metrics.guard';
import { MetricsSource } from './metrics-source';
import {
  DashboardController,
  LOGIN_ATTEMPTS_PER_MINUTE,
  LOGIN_ATTEMPTS_PER_MINUTE_ALL,
} from './dashboard/dashboard.controller';
import { DashboardService } from './dashboard/dashboard.service';

/**
 * PrometheusModule.register collects the default metrics into the global registry: once
 * per process (tests and benchmarks create several apps), hence one module per kind.
 */
const prometheus = new Map<boolean, DynamicModule>();
function prometheusModule(aggregating: boolean): DynamicModule {
  let m = prometheus.get(aggregating);
  if (!m) {
    m = PrometheusModule.register({
      path: '/metrics',
      defaultMetrics: { enabled: true },
      controller: aggregating ? DpMetricsController : GuardedMetricsController,
    });
    prometheus.set(aggregating, m);
  }
  return m;
}

/** Prometheus /metrics; a DP supervisor's covers every worker, each worker reports its own. */
@Module({})
export class MetricsModule {
  static for(role: DpRole): DynamicModule {
    return {
      module: MetricsModule,
      imports: [
        prometheusModule(role === 'supervisor'),
        MetaRegistryModule,
        RoutingModule,
        // Only the dashboard's sign-in is throttled (ThrottlerGuard on that one route): per
        // client address, and across every address together, since behind
        // EPD_HTTP_TRUST_PROXY the address is whatever X-Forwarded-For says.
        ThrottlerModule.forRoot([
          { name: 'address', ttl: 60_000, limit: LOGIN_ATTEMPTS_PER_MINUTE },
          {
            name: 'all',
            ttl: 60_000,
            limit: LOGIN_ATTEMPTS_PER_MINUTE_ALL,
            getTracker: () => 'every-address',
          },
        ]),
      ],
      controllers: [DashboardController],
      providers: [
        MetricsSource,
        DashboardService,
        MetricsGuard,
        ObjectStoreMetrics,
        RegistryMetrics,
        RoutingMetrics,
        TransportMetrics,
        ...(role === 'worker' ? [WorkerMetricsReporter] : []),
      ],
    };
  }
}
