import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { decide, type Recommendation, type ScalingPolicy } from './scaling-rule';

/**
 * The rule over a day, simulated (a test, not a timing claim): a day-shaped arrival curve,
 * served at the service rate the encode-throughput benchmark measured on this machine
 * (bench/results/encode-throughput.json, 448² images, batching on), by a pool the rule
 * sizes every 10 s (a new encoder serves 30 s after it is asked for), against a fixed pool
 * sized for the peak. Reports replica-minutes and the share of the day the oldest queued
 * request was older than the target, and holds the rule to bounds on both.
 */
describe('scaling rule over a simulated day', () => {
  const measured = JSON.parse(
    readFileSync(join(__dirname, '../../bench/results/encode-throughput.json'), 'utf8'),
  ) as { results: { batchedRate: number }; commit: string };
  const mu = measured.results.batchedRate; // images/s one encoder serves
  const policy: ScalingPolicy = {
    targetUtilization: 0.7,
    targetQueueMs: 500,
    scaleInStableS: 300,
    min: 1,
    max: 64,
  };
  const DAY_S = 24 * 3600;
  const STEP_S = 10;
  const START_S = 30;
  const PEAK = 6 * mu; // images/s at the busiest minute
  /** Trough at 04:00 at a tenth of the peak, peak at 16:00, and a 5-minute burst at 09:00. */
  const arrivals = (t: number) => {
    const day = 0.1 + 0.9 * (0.5 - 0.5 * Math.cos((2 * Math.PI * (t - 4 * 3600)) / DAY_S));
    const burst = t >= 9 * 3600 && t < 9 * 3600 + 300 ? 0.5 : 0;
    return PEAK * (day + burst);
  };

  function run(size: (state: { t: number; replicas: number; backlog: number }) => number) {
    let backlog = 0;
    let replicas = size({ t: 0, replicas: 1, backlog });
    const pending: { at: number; replicas: number }[] = [];
    let replicaSeconds = 0;
    let lateSteps = 0;
    let peakReplicas = 0;
    for (let t = 0; t < DAY_S; t += STEP_S) {
      // Encoders asked for START_S ago serve now; fewer take effect at once (drained).
      while (pending.length > 0 && pending[0]!.at <= t) replicas = pending.shift()!.replicas;
      const lambda = arrivals(t);
      backlog = Math.max(0, backlog + (lambda - replicas * mu) * STEP_S);
      const ageMs = (backlog / (replicas * mu)) * 1000;
      if (ageMs > policy.targetQueueMs) lateSteps++;
      replicaSeconds += replicas * STEP_S;
      peakReplicas = Math.max(peakReplicas, replicas);
      const want = size({ t, replicas, backlog });
      if (want > replicas) pending.push({ at: t + START_S, replicas: want });
      else if (want < replicas) {
        pending.length = 0;
        replicas = want;
      }
    }
    return {
      replicaMinutes: Math.round(replicaSeconds / 60),
      lateShare: lateSteps / (DAY_S / STEP_S),
      peakReplicas,
    };
  }

  it('uses fewer replica-minutes than a pool sized for the peak, and keeps queues under the target almost all day', () => {
    const history: Recommendation[] = [];
    const auto = run(({ t, replicas, backlog }) => {
      const lambda = arrivals(t);
      const per = {
        arrival_rate: lambda / replicas,
        service_rate: mu,
        queue_depth: backlog / replicas,
        oldest_queued_ms: (backlog / (replicas * mu)) * 1000,
      };
      return decide(
        Array.from({ length: replicas }, () => per),
        policy,
        history,
        t * 1000,
      ).desired_replicas;
    });
    const peakPool = Math.ceil((PEAK * 1.5) / (mu * policy.targetUtilization));
    const fixed = run(() => peakPool);
    process.stdout.write(
      `scaling simulation (service rate ${mu.toFixed(1)} images/s per encoder, from ` +
        `encode-throughput at ${measured.commit}): autoscaled ${auto.replicaMinutes} ` +
        `replica-minutes (peak ${auto.peakReplicas}), queue age over ${policy.targetQueueMs} ms ` +
        `${(auto.lateShare * 100).toFixed(2)}% of the day; fixed pool of ${peakPool}: ` +
        `${fixed.replicaMinutes} replica-minutes, ${(fixed.lateShare * 100).toFixed(2)}%\n`,
    );
    expect(auto.replicaMinutes).toBeLessThan(0.7 * fixed.replicaMinutes);
    expect(auto.lateShare).toBeLessThan(0.02);
    expect(fixed.lateShare).toBe(0);
  });
});
