import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { prng } from '../common/prng';
import { decide, type InstanceLoad, type Recommendation, type ScalingPolicy } from './scaling-rule';

/**
 * The rule over a day, simulated (a test, not a timing claim). The day: a day-shaped
 * arrival curve with a 5-minute burst at 09:00 and a 5-minute stall at 20:00 (the encoders
 * serve nothing: a dependency lost and back), served at the service rate the encode-throughput
 * benchmark measured on this machine (bench/results/encode-throughput.json, 448² images,
 * batching on). What the rule sees is what the instances' heartbeats carry, not the truth:
 * arrivals averaged over the last EPD_SCALE_WINDOW_S (so they lag the curve), a service
 * rate each instance measured with noise (the real rate is hidden from the rule), and the
 * queue as of the last heartbeat. A new encoder serves START_S after it is asked for. The
 * comparison is a fixed pool sized for the day's real peak (burst included) at the same
 * target utilization: what an operator without an autoscaler would run.
 *
 * The bounds hold the rule to both costs, and each is shown to catch a broken rule: one
 * without its queue term (it leaves the burst's backlog late), and one that over-provisions
 * by 1.5× (it spends the replica-minutes the rule exists to save). The queue term earns
 * its place after the stall: arrivals are back to normal, so utilization alone sizes the
 * pool for them and the backlog drains only through its 30% headroom.
 */
describe('scaling rule over a simulated day', () => {
  const measured = JSON.parse(
    readFileSync(join(__dirname, '../../bench/results/encode-throughput.json'), 'utf8'),
  ) as { results: { batchedRate: number }; commit: string };
  const mu = measured.results.batchedRate; // images/s one encoder really serves
  const policy: ScalingPolicy = {
    targetUtilization: 0.7,
    targetQueueMs: 500,
    scaleInStableS: 300,
    min: 1,
    max: 64,
  };
  const DAY_S = 24 * 3600;
  const STEP_S = 10; // one decision per heartbeat period
  const WINDOW_S = 30; // EPD_SCALE_WINDOW_S' default: what each arrival rate averages
  const START_S = 45; // asked for → serving (pull, load the model, join)
  const NOISE = 0.1; // ±10% on each instance's measured rates
  const PEAK = 6 * mu; // images/s at the busiest minute of the curve
  /** Trough at 04:00 at a tenth of the peak, peak at 16:00, and a 5-minute burst at 09:00. */
  const arrivals = (t: number) => {
    const day = 0.1 + 0.9 * (0.5 - 0.5 * Math.cos((2 * Math.PI * (t - 4 * 3600)) / DAY_S));
    const burst = t >= 9 * 3600 && t < 9 * 3600 + 300 ? 0.5 : 0;
    return PEAK * (day + burst);
  };
  const STALL = { from: 20 * 3600, to: 20 * 3600 + 300 };
  const stalled = (t: number) => t >= STALL.from && t < STALL.to;
  let realPeak = 0;
  for (let t = 0; t < DAY_S; t += STEP_S) realPeak = Math.max(realPeak, arrivals(t));
  const fixedPool = Math.ceil(realPeak / (mu * policy.targetUtilization));

  interface Seen {
    t: number;
    replicas: number;
    /** One heartbeat per live instance, as the rule receives them. */
    loads: InstanceLoad[];
  }

  function run(size: (seen: Seen) => number) {
    const noise = prng(20261206);
    const jitter = () => 1 + NOISE * (2 * noise() - 1);
    let backlog = 0;
    // The day starts from the night before: the pool as this sizing keeps it at midnight.
    let replicas = Math.ceil(arrivals(0) / (mu * policy.targetUtilization));
    const pending: { at: number; replicas: number }[] = [];
    const recent: number[] = []; // arrivals of the last WINDOW_S, one entry per step
    let lastHeartbeat = { backlog: 0, replicas: 1 };
    let replicaSeconds = 0;
    let lateSteps = 0;
    let peakReplicas = 0;
    for (let t = 0; t < DAY_S; t += STEP_S) {
      // Encoders asked for START_S ago serve now; fewer take effect at once (drained).
      while (pending.length > 0 && pending[0]!.at <= t) replicas = pending.shift()!.replicas;
      const lambda = arrivals(t);
      recent.push(lambda);
      if (recent.length > WINDOW_S / STEP_S) recent.shift();
      const served = stalled(t) ? 0 : replicas * mu;
      backlog = Math.max(0, backlog + (lambda - served) * STEP_S);
      const ageMs = (backlog / (replicas * mu)) * 1000;
      // Late while the pool could act: the stall's own minutes are late for any pool.
      if (ageMs > policy.targetQueueMs && !stalled(t)) lateSteps++;
      replicaSeconds += replicas * STEP_S;
      peakReplicas = Math.max(peakReplicas, replicas);
      // The heartbeats: the window's mean arrivals and a measured service rate, each with
      // its own noise; the queue as it stood at the previous heartbeat.
      const windowRate = recent.reduce((n, x) => n + x, 0) / recent.length;
      const seenQueue = lastHeartbeat.backlog / lastHeartbeat.replicas;
      const loads: InstanceLoad[] = Array.from({ length: replicas }, () => {
        // Stalled, an instance completes nothing: no service rate measured (0).
        const serviceRate = stalled(t) ? 0 : mu * jitter();
        return {
          arrival_rate: (windowRate / replicas) * jitter(),
          service_rate: serviceRate,
          queue_depth: seenQueue,
          oldest_queued_ms: (seenQueue / (serviceRate || mu)) * 1000,
        };
      });
      lastHeartbeat = { backlog, replicas };
      const want = size({ t, replicas, loads });
      if (want > replicas) {
        if (!pending.some((p) => p.replicas >= want))
          pending.push({ at: t + START_S, replicas: want });
      } else if (want < replicas) {
        pending.length = 0;
        replicas = want;
      }
    }
    return {
      replicaMinutes: Math.round(replicaSeconds / 60),
      lateMinutes: (lateSteps * STEP_S) / 60,
      peakReplicas,
    };
  }

  /** The rule as the service runs it, with `alter` applied to the policy or the answer. */
  function rule(
    alter: { policy?: Partial<ScalingPolicy>; scale?: number } = {},
  ): (seen: Seen) => number {
    const history: Recommendation[] = [];
    const p = { ...policy, ...alter.policy };
    return ({ t, loads }) => {
      const desired = decide(loads, p, history, t * 1000).desired_replicas;
      return Math.min(p.max, Math.ceil(desired * (alter.scale ?? 1)));
    };
  }

  const fixed = run(() => fixedPool);
  /** The bounds: a third fewer replica-minutes than the fixed pool, at most 5 late minutes. */
  const SAVING = 0.67;
  const LATE_MINUTES = 5;
  const verdict = (r: ReturnType<typeof run>) => ({
    saves: r.replicaMinutes < SAVING * fixed.replicaMinutes,
    onTime: r.lateMinutes <= LATE_MINUTES,
  });
  const report = (name: string, r: ReturnType<typeof run>) =>
    `  ${name}: ${r.replicaMinutes} replica-minutes (${((r.replicaMinutes / fixed.replicaMinutes) * 100).toFixed(1)}% of the fixed pool's), peak ${r.peakReplicas}, queue age over ${policy.targetQueueMs} ms for ${r.lateMinutes.toFixed(1)} min outside the stall`;

  it('uses a third fewer replica-minutes than a pool sized for the real peak, with the queue late 5 minutes a day at most (the stall aside)', () => {
    const auto = run(rule());
    process.stdout.write(
      `scaling simulation (service rate ${mu.toFixed(1)} images/s per encoder, hidden from the rule, from ` +
        `encode-throughput at ${measured.commit}; inputs over a ${WINDOW_S} s window, ±${NOISE * 100}% noise, ${START_S} s to start):\n` +
        `${report(`fixed pool of ${fixedPool}`, fixed)}\n${report('the rule', auto)}\n`,
    );
    expect(verdict(auto)).toEqual({ saves: true, onTime: true });
  });

  it("catches a rule without its queue term: the stall's backlog stays late", () => {
    // The queue term never fires when its target is never exceeded.
    const noQueue = run(rule({ policy: { targetQueueMs: Number.POSITIVE_INFINITY } }));
    process.stdout.write(`${report('without the queue term', noQueue)}\n`);
    expect(verdict(noQueue).onTime).toBe(false);
  });

  it('catches a rule that over-provisions by 1.5×: it no longer saves', () => {
    const over = run(rule({ scale: 1.5 }));
    process.stdout.write(`${report('1.5× over-provisioned', over)}\n`);
    expect(verdict(over).saves).toBe(false);
  });
});
