import { decide, type InstanceLoad, type Recommendation, type ScalingPolicy } from './scaling-rule';

const policy: ScalingPolicy = {
  targetUtilization: 0.7,
  targetQueueMs: 500,
  scaleInStableS: 60,
  min: 1,
  max: 10,
};
const load = (over: Partial<InstanceLoad> = {}): InstanceLoad => ({
  arrival_rate: 0,
  service_rate: 10,
  queue_depth: 0,
  oldest_queued_ms: 0,
  ...over,
});

describe('scaling rule', () => {
  it('rising load: enough encoders to keep utilization under the target', () => {
    const history: Recommendation[] = [];
    const at = (rate: number, t: number) =>
      decide(
        [load({ arrival_rate: rate / 2 }), load({ arrival_rate: rate / 2 })],
        policy,
        history,
        t,
      );
    expect(at(5, 0).desired_replicas).toBe(1); // 5 / (10 × 0.7) → 1
    expect(at(14, 1000).desired_replicas).toBe(2);
    const d = at(30, 2000); // 30 / 7 → 5 (one step from 2 allows 6)
    expect(d).toMatchObject({ desired_replicas: 5, raw_replicas: 5 });
    expect(d.cluster).toMatchObject({ instances: 2, arrival_rate: 30, utilization: 1.5 });
    expect(d.reason).toBe('utilization 1.50 > target 0.7');
  });

  it('a burst: a queue older than the target asks for enough to drain it within the target', () => {
    const d = decide(
      [load({ arrival_rate: 5, queue_depth: 40, oldest_queued_ms: 2100 })],
      policy,
      [],
      0,
    );
    // 40 queued served within 0.5 s at 10/s each: 8, more than utilization's ceil(5 / 7) = 1,
    // but one step from 1 live instance goes to 5 at most.
    expect(d).toMatchObject({ desired_replicas: 5, raw_replicas: 8 });
    expect(d.reason).toBe('queue age 2.1 s > target 0.5 s; at most 5 in one step');
  });

  it('a slow image mix: the measured service rate, not a configured one, sets the count', () => {
    const fast = decide([load({ arrival_rate: 20, service_rate: 40 })], policy, [], 0);
    const slow = decide([load({ arrival_rate: 20, service_rate: 4 })], policy, [], 0);
    expect(fast.desired_replicas).toBe(1); // 20 / 28
    expect(slow.raw_replicas).toBe(8); // 20 / 2.8 → 7.14 → 8 (5 in this first step)
  });

  it('an instance leaving: the same demand over fewer live instances asks for the same total', () => {
    const three = [1, 2, 3].map(() => load({ arrival_rate: 7 }));
    const two = [load({ arrival_rate: 10.5 }), load({ arrival_rate: 10.5 })];
    expect(decide(three, policy, [], 0).desired_replicas).toBe(3);
    expect(decide(two, policy, [], 0).desired_replicas).toBe(3);
  });

  it('hysteresis: scale-out at once, scale-in only after the window of lower demand', () => {
    const history: Recommendation[] = [];
    const at = (rate: number, s: number) =>
      decide([load({ arrival_rate: rate })], policy, history, s * 1000);
    expect(at(35, 0).desired_replicas).toBe(5);
    expect(at(70, 5).desired_replicas).toBe(5); // 10 wanted; one step from 1 live goes to 5
    const dip = at(7, 10); // wants 1, holds 5
    expect(dip).toMatchObject({ desired_replicas: 5, raw_replicas: 1 });
    expect(dip.reason).toMatch(/holding 5 until 60 s of lower demand/);
    expect(at(7, 64).desired_replicas).toBe(5); // the 5 of t=5 is still in the window
    expect(at(7, 66).desired_replicas).toBe(1); // and now it left
    expect(at(21, 67).desired_replicas).toBe(3); // back out at once
    expect(history.every((r) => r.at >= 7000)).toBe(true); // bounded by the window
  });

  it('never outside [min, max], and says so; nothing measured keeps the current count', () => {
    const bounded = { ...policy, min: 2, max: 4 };
    expect(decide([load()], bounded, [], 0)).toMatchObject({
      desired_replicas: 2,
      reason: 'utilization 0.00 within target 0.7; at EPD_SCALE_MIN=2',
    });
    const two = [1, 2].map(() => load({ arrival_rate: 50 }));
    expect(decide(two, bounded, [], 0)).toMatchObject({
      desired_replicas: 4,
      reason: 'utilization 5.00 > target 0.7; capped at EPD_SCALE_MAX=4',
    });
    const unmeasured = [load({ service_rate: 0, arrival_rate: 3 }), load({ service_rate: 0 })];
    expect(decide(unmeasured, policy, [], 0)).toMatchObject({
      desired_replicas: 2,
      reason: 'no service rate measured yet',
    });
    const idle = [load({ service_rate: 0 }), load({ service_rate: 0 })];
    expect(decide(idle, policy, [], 0)).toMatchObject({
      desired_replicas: 1,
      reason: 'no demand; at EPD_SCALE_MIN=1',
    });
  });
});
