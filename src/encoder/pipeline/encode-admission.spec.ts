import { Clock } from '../../common/clock';
import { LifecycleEvents } from '../../common/lifecycle-events';
import { loadConfig } from '../../config/config.loader';
import type { ProfilerService } from '../../profiling/profiler.service';
import { ADMISSION_PROVIDERS } from './admission.providers';
import { EncodeAdmission } from './encode-admission.service';
import type { EncoderMetrics } from './encoder.metrics';
import { LoadMeter } from './load-meter';
import { WorkBudget } from './work-budget';

type Factory = { provide: unknown; useFactory: (...args: unknown[]) => unknown };

/**
 * The admission tells `pipeline.pending` after each change, and whoever follows it (the
 * metrics' gauge, the object store's write throttle) learns it without the admission
 * knowing them: 0 again once every admitted request is settled, also a refused one.
 */
describe('EncodeAdmission: the pending count as an event', () => {
  const { config } = loadConfig({ EPD_MAX_PENDING: '2' });
  const clock = new Clock();
  const build = (provide: unknown) =>
    (ADMISSION_PROVIDERS as Factory[])
      .find((p) => p.provide === provide)!
      .useFactory(config, clock);
  const setup = () => {
    const events = new LifecycleEvents();
    const seen: number[] = [];
    events.on('pipeline.pending', (n) => seen.push(n));
    const metrics = { received: () => undefined, request: () => undefined };
    const admission = new EncodeAdmission(
      config,
      metrics as unknown as EncoderMetrics,
      { step: () => undefined } as unknown as ProfilerService,
      build(WorkBudget) as WorkBudget,
      build(LoadMeter) as LoadMeter,
      events,
    );
    return { admission, seen };
  };

  it('tells each admission and each settle, and 0 once all are answered', () => {
    const { admission, seen } = setup();
    const a = admission.admit('image', 'a', 1);
    const b = admission.admit('image', 'b', 1);
    // EPD_MAX_PENDING=2: the third is refused (503) and changes nothing.
    expect(() => admission.admit('image', 'c', 1)).toThrow(/2/);
    admission.settle(a, 'image', 'success');
    admission.settle(b, 'image', 'error');
    expect(seen).toEqual([1, 2, 1, 0]);
    expect(admission.pendingRequests).toBe(0);
  });

  it('reads the meters the module builds (one WorkBudget of EPD_WORK_MAX_BYTES)', () => {
    const { admission } = setup();
    expect(admission.work.stats().max_bytes).toBe(config.encoder.workMaxBytes);
  });
});
