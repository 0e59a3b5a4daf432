import { encodeBody, waitFor } from './support/calls';
import { serviceWithClient, type ServiceProcess } from './support/service-process';

/**
 * M5 of "Hardening, third pass": arrivals were counted per mm_item before EPD_MAX_ITEMS was
 * checked, and mm_items has no upper bound of its own: one ~1 MB request, answered 413,
 * took desired_replicas from 1 to 5 and held it. A refused request counts nothing.
 */
describe('M5: a request over EPD_MAX_ITEMS moves no autoscaling input (e2e)', () => {
  let svc: ServiceProcess;
  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ svc, close } = await serviceWithClient());
  }, 60_000);
  afterAll(() => close?.());

  it('answers 413 naming EPD_MAX_ITEMS, and arrivals and desired_replicas stay where they were', async () => {
    const sent = Date.now();
    const items = Array.from({ length: 40_000 }, (_, i) => `data:image/png;base64,${i}`);
    const r = await fetch(`${svc.url}/encode`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(encodeBody('m5', items)),
    });
    expect(r.status).toBe(413);
    expect(((await r.json()) as { message: string }).message).toMatch(/EPD_MAX_ITEMS/);
    type View = {
      computed_at: number;
      desired_replicas: number;
      self: { arrival_rate: number; queue_depth: number };
    };
    let scaling!: View;
    // A decision computed after the request (once a heartbeat, 2 s at the defaults).
    await waitFor(async () => {
      scaling = (await (await fetch(`${svc.url}/admin/scaling`)).json()) as View;
      return scaling.computed_at > sent;
    }, 10_000);
    expect(scaling.self).toMatchObject({ arrival_rate: 0, queue_depth: 0 });
    expect(scaling.desired_replicas).toBe(1);
  });
});
