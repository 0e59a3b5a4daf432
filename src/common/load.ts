/** What this process measured over the last EPD_SCALE_WINDOW_S (the autoscaling signal, docs/scaling.md). */
export interface LoadSnapshot {
  /** Items admitted per second. */
  arrival_rate: number;
  /**
   * Items completed per second of busy time (≥ 1 request in flight); an idle window keeps
   * the last one measured, 0 until the first.
   */
  service_rate: number;
  /** Items admitted and not yet answered. */
  queue_depth: number;
  /** Age of the oldest admitted, unanswered request (ms; 0 when none). */
  oldest_queued_ms: number;
}

/**
 * Where the autoscaling signal reads this instance's load: the encode pipeline's own
 * (one process), or its DP workers' summed by the supervisor.
 */
export abstract class LoadSource {
  abstract snapshot(): LoadSnapshot;
}

/**
 * One instance's load from its DP workers': arrivals, queues and service rates add up (the
 * workers serve at once, one core each); the oldest queued request is the oldest of any.
 */
export function sumLoads(loads: readonly LoadSnapshot[]): LoadSnapshot {
  const r3 = (x: number) => Math.round(x * 1000) / 1000;
  return {
    arrival_rate: r3(loads.reduce((n, l) => n + l.arrival_rate, 0)),
    service_rate: r3(loads.reduce((n, l) => n + l.service_rate, 0)),
    queue_depth: loads.reduce((n, l) => n + l.queue_depth, 0),
    oldest_queued_ms: Math.max(0, ...loads.map((l) => l.oldest_queued_ms)),
  };
}
