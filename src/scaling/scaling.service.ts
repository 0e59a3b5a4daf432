import { LifecycleEvents } from '../common/lifecycle-events';
import { Injectable, Logger, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { Clock } from '../common/clock';
import { LoadSource, type LoadSnapshot } from '../common/load';
import { AppConfig } from '../config/app-config';
import { InstanceRoster } from '../routing/instance-roster.service';
import {
  decide,
  type Recommendation,
  type ScalingDecision,
  type ScalingPolicy,
} from './scaling-rule';

/** GET /admin/scaling and the NATS `stats` reply: the decision, its inputs and its rule. */
export interface ScalingView extends ScalingDecision {
  /** The live instances whose heartbeats it was computed from, with what each measured. */
  instances: { id: string; self: boolean; load: LoadSnapshot | null }[];
  /** This instance's own figures now (its heartbeat carries them at the next beat). */
  self: LoadSnapshot;
  policy: ScalingPolicy;
  /** When it was computed (epoch ms): once a heartbeat. */
  computed_at: number;
}

const NO_LOAD: LoadSnapshot = {
  arrival_rate: 0,
  service_rate: 0,
  queue_depth: 0,
  oldest_queued_ms: 0,
};

/**
 * The cluster-wide "desired encoders" signal (docs/scaling.md, "Autoscaling"). Each
 * instance measures its own load (LoadMeter) and puts it in its roster heartbeat; each
 * computes the decision from every live instance's last heartbeat, its own included, so
 * that every instance reports the same number within a heartbeat. Without the shared
 * store (no roster) the cluster is this instance. A DP instance's load is its workers'
 * (DpLoad).
 */
@Injectable()
export class ScalingService implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('Scaling');
  private readonly history: Recommendation[] = [];
  private timer?: NodeJS.Timeout;
  private last?: ScalingView;
  readonly policy: ScalingPolicy;

  constructor(
    private readonly config: AppConfig,
    private readonly clock: Clock,
    private readonly roster: InstanceRoster,
    private readonly load: LoadSource,
    private readonly events: LifecycleEvents,
  ) {
    const s = config.scale;
    this.policy = {
      targetUtilization: s.targetUtilization,
      targetQueueMs: s.targetQueueMs,
      scaleInStableS: s.inStableS,
      min: s.min,
      max: s.max,
    };
  }

  onModuleInit(): void {
    // Measured once now, so that the first heartbeat carries a load.
    this.events.emit('load.measured', this.load.snapshot());
    // Nothing a timer runs may end the process (a bare throw here once stopped every
    // instance of a cluster): a failed computation is logged, the last decision kept.
    this.timer = setInterval(() => {
      try {
        this.compute();
      } catch (err) {
        this.logger.error({ err: (err as Error).message }, 'scaling decision not computed');
      }
    }, this.config.instance.heartbeatMs);
    this.timer.unref();
  }

  onModuleDestroy(): void {
    clearInterval(this.timer);
  }

  /** The last decision (computed now if none was yet). */
  current(): ScalingView {
    return this.last ?? this.compute();
  }

  /** Decides from the live instances' heartbeats; once a heartbeat, on the timer. */
  compute(): ScalingView {
    const self = this.load.snapshot();
    // Told before the roster is read: this instance's entry, and its next heartbeat, carry it.
    this.events.emit('load.measured', self);
    const instances = this.roster.enabled
      ? this.roster
          .list()
          .filter((v) => v.alive)
          .map((v) => ({ id: v.id, self: v.self, load: v.load ?? null }))
      : [{ id: this.config.instance.id, self: true, load: self }];
    const now = this.clock.now();
    const decision = decide(
      instances.map((i) => i.load ?? NO_LOAD),
      this.policy,
      this.history,
      now,
    );
    this.last = { ...decision, instances, self, policy: this.policy, computed_at: now };
    return this.last;
  }
}
