import { LoadMeter } from './load-meter';

const LOAD_WINDOW_S = 30;

describe('LoadMeter (the autoscaling signal: one process load)', () => {
  it('measures arrivals over the window, service per busy second, and what is queued', () => {
    let t = 1_000_000;
    const meter = new LoadMeter(() => t, LOAD_WINDOW_S);
    // Busy 2 s serving 4 items; idle 8 s; 2 items in flight for 1.5 s; 3 refused.
    const a = meter.arrive(1);
    const b = meter.arrive(3);
    t += 2000;
    meter.done(a, true);
    meter.done(b, true);
    t += 8000;
    const c = meter.arrive(2);
    meter.refused(3);
    t += 1500;
    const s = meter.snapshot();
    expect(s.arrival_rate).toBeCloseTo(9 / LOAD_WINDOW_S, 3);
    expect(s.service_rate).toBeCloseTo(4 / 3.5, 3); // the in-flight 1.5 s counts as busy
    expect(s).toMatchObject({ queue_depth: 2, oldest_queued_ms: 1500 });
    meter.done(c, false); // failed: not served
    t += (LOAD_WINDOW_S + 1) * 1000;
    // The window passed: nothing left, nothing in flight (bounded in time and in size);
    // the service rate is the last one measured, which an idle window cannot measure.
    expect(meter.snapshot()).toEqual({
      arrival_rate: 0,
      service_rate: s.service_rate,
      queue_depth: 0,
      oldest_queued_ms: 0,
    });
  });
});
