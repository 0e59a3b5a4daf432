import type { LoadSnapshot } from '../common/load';

/**
 * The autoscaling rule (docs/scaling.md, "Autoscaling"): how many encoders the cluster
 * needs, from what every live instance measured. A pure function of its inputs and of the
 * recent recommendations, so every instance that sees the same roster says the same.
 */

/** What one instance measured over the last window (its heartbeat's figures). */
export type InstanceLoad = LoadSnapshot;

export interface ScalingPolicy {
  /** EPD_SCALE_TARGET_UTILIZATION: arrivals over capacity to stay under (0–1). */
  targetUtilization: number;
  /** EPD_SCALE_TARGET_QUEUE_MS: the oldest queued request's age to stay under. */
  targetQueueMs: number;
  /** EPD_SCALE_IN_STABLE_S: lower demand must last this long before the count drops. */
  scaleInStableS: number;
  /** EPD_SCALE_MIN / EPD_SCALE_MAX. */
  min: number;
  max: number;
}

/** The cluster's figures: the sums and the worst, over live instances. */
export interface ClusterLoad {
  instances: number;
  arrival_rate: number;
  /** Mean service rate per encoder, over the instances that measured one. */
  service_rate: number;
  queue_depth: number;
  oldest_queued_ms: number;
  /** Arrivals over what the live instances serve (0 when nothing is measured). */
  utilization: number;
}

export interface ScalingDecision {
  desired_replicas: number;
  /** What the inputs alone ask for, before the scale-in window and the bounds. */
  raw_replicas: number;
  cluster: ClusterLoad;
  /** One line: why this number. */
  reason: string;
}

/** One recommendation, kept for the scale-in window. */
export interface Recommendation {
  at: number;
  replicas: number;
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;

/** Recommendations kept at most (the service decides once a heartbeat). */
export const MAX_HISTORY = 4096;

export function clusterLoad(loads: readonly InstanceLoad[]): ClusterLoad {
  const measured = loads.filter((l) => l.service_rate > 0);
  const sum = (f: (l: InstanceLoad) => number) => loads.reduce((n, l) => n + f(l), 0);
  const serviceRate =
    measured.length === 0 ? 0 : measured.reduce((n, l) => n + l.service_rate, 0) / measured.length;
  const arrival = sum((l) => l.arrival_rate);
  const capacity = serviceRate * loads.length;
  return {
    instances: loads.length,
    arrival_rate: round3(arrival),
    service_rate: round3(serviceRate),
    queue_depth: sum((l) => l.queue_depth),
    oldest_queued_ms: Math.round(Math.max(0, ...loads.map((l) => l.oldest_queued_ms))),
    utilization: capacity > 0 ? round3(arrival / capacity) : 0,
  };
}

/**
 * Replicas for the inputs alone, and the reason:
 * - utilization: `ceil(arrival_rate / (service_rate × target_utilization))`;
 * - queue: while the oldest queued request is older than the target, enough that what is
 *   queued is served within the target: `ceil(queue_depth / (target_queue_s × service_rate))`.
 * The larger wins. Without a measured service rate, the current count (nothing to go by),
 * or none at all when nothing arrives.
 */
function rawReplicas(c: ClusterLoad, p: ScalingPolicy): { replicas: number; reason: string } {
  if (c.service_rate <= 0) {
    // Nothing served yet: with no demand either, the minimum; else keep what there is.
    return c.arrival_rate === 0 && c.queue_depth === 0
      ? { replicas: 0, reason: 'no demand' }
      : { replicas: Math.max(c.instances, 1), reason: 'no service rate measured yet' };
  }
  const byUtil = Math.ceil(c.arrival_rate / (c.service_rate * p.targetUtilization));
  const queueS = p.targetQueueMs / 1000;
  const late = c.oldest_queued_ms > p.targetQueueMs;
  const byQueue = late ? Math.ceil(c.queue_depth / (queueS * c.service_rate)) : 0;
  if (late && byQueue >= byUtil) {
    return {
      replicas: byQueue,
      reason: `queue age ${(c.oldest_queued_ms / 1000).toFixed(1)} s > target ${queueS} s`,
    };
  }
  const util = c.utilization.toFixed(2);
  return {
    replicas: byUtil,
    reason:
      c.utilization > p.targetUtilization
        ? `utilization ${util} > target ${p.targetUtilization}`
        : `utilization ${util} within target ${p.targetUtilization}`,
  };
}

/**
 * The decision at `now`: scale-out at once, but by at most double the live count (or 4
 * more, whichever is larger) per decision, as Kubernetes' HPA limits itself, so a burst
 * does not ask for EPD_SCALE_MAX before the first new encoder is even up; scale-in only to
 * the largest recommendation of the last EPD_SCALE_IN_STABLE_S (so a dip shorter than the
 * window changes nothing); never outside [min, max]. `history` is this instance's recent
 * recommendations, oldest first; it is trimmed to the window and the new one appended.
 */
export function decide(
  loads: readonly InstanceLoad[],
  policy: ScalingPolicy,
  history: Recommendation[],
  now: number,
): ScalingDecision {
  const cluster = clusterLoad(loads);
  const raw = rawReplicas(cluster, policy);
  const clamp = (n: number) => Math.min(policy.max, Math.max(policy.min, n));
  const step = Math.max(2 * cluster.instances, cluster.instances + 4);
  const recommended = clamp(Math.min(raw.replicas, step));
  const windowStart = now - policy.scaleInStableS * 1000;
  while (history.length > 0 && history[0]!.at < windowStart) history.shift();
  history.push({ at: now, replicas: recommended });
  if (history.length > MAX_HISTORY) history.splice(0, history.length - MAX_HISTORY);
  const desired = Math.max(...history.map((r) => r.replicas));
  let reason = raw.reason;
  if (desired > recommended)
    reason += `; holding ${desired} until ${policy.scaleInStableS} s of lower demand`;
  else if (raw.replicas > policy.max && policy.max <= step)
    reason += `; capped at EPD_SCALE_MAX=${policy.max}`;
  else if (raw.replicas > step) reason += `; at most ${step} in one step`;
  else if (raw.replicas < policy.min) reason += `; at EPD_SCALE_MIN=${policy.min}`;
  return { desired_replicas: desired, raw_replicas: raw.replicas, cluster, reason };
}
