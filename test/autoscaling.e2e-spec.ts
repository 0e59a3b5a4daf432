import { sharedNatsUrl, uniquePrefix } from './support/app';
import { encodeBody, waitFor } from './support/calls';
import { dataUri, image } from './support/media';
import { startServiceProcess, type ServiceProcess } from './support/service-process';

interface Scaling {
  desired_replicas: number;
  reason: string;
  cluster: { instances: number; arrival_rate: number; service_rate: number };
  self: { arrival_rate: number; service_rate: number };
  computed_at: number;
}

const HEARTBEAT_MS = 500;
const WINDOW_S = 3;
const STABLE_S = 2;

/**
 * "Autoscaling": two instances on one shared store. Offered load above what one encoder
 * serves makes both report desired_replicas ≥ 2 within 3 heartbeats of the load being
 * measured; idle, it comes back to EPD_SCALE_MIN after the measurement window and the
 * scale-in window. Both instances agree. (Short windows so that this runs in seconds.)
 */
describe('autoscaling signal (e2e, two instances)', () => {
  const prefix = uniquePrefix();
  const bucket = `as_${process.pid}`;
  let a: ServiceProcess;
  let b: ServiceProcess;
  const start = (id: string) =>
    startServiceProcess({
      EPD_NATS_URL: sharedNatsUrl(),
      EPD_SUBJECT_PREFIX: prefix,
      EPD_REGISTRY_STORE: 'jetstream',
      EPD_KV_BUCKET: bucket,
      EPD_INSTANCE_ID: `${id}${process.pid}`,
      EPD_INSTANCE_HEARTBEAT_MS: String(HEARTBEAT_MS),
      EPD_SCALE_WINDOW_S: String(WINDOW_S),
      EPD_SCALE_IN_STABLE_S: String(STABLE_S),
      EPD_SCALE_MIN: '1',
    });

  beforeAll(async () => {
    [a, b] = await Promise.all([start('sa'), start('sb')]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  });

  const scaling = async (svc: ServiceProcess) =>
    (await (await fetch(`${svc.url}/admin/scaling`)).json()) as Scaling;
  const both = () => Promise.all([scaling(a), scaling(b)]);

  it('asks for 2 or more encoders under load one cannot serve, on both instances, and back to 1 when idle', async () => {
    const png = dataUri(await image(448, 448, 'png'), 'image/png');
    // Closed-loop load on both, 6 at a time each: both busy all the time, so the cluster's
    // arrivals match what two encoders serve, more than one can (and more than 0.7 of two).
    let stop = false;
    let seq = 0;
    const loop = async (svc: ServiceProcess) => {
      while (!stop) {
        const id = `as-${++seq}`;
        await fetch(`${svc.url}/encode`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(encodeBody(id, [png])),
        });
        await fetch(`${svc.url}/admin/requests/${id}/release`, { method: 'POST' });
      }
    };
    const loops = [a, b].flatMap((svc) => Array.from({ length: 6 }, () => loop(svc)));
    try {
      // Once a's own figures show more than 0.7 of what it serves, both instances must say
      // 2 within 3 heartbeats: counted as decisions (a new computed_at each heartbeat), not
      // as wall-clock time, which a loaded machine stretches.
      await waitFor(
        async () => {
          const { self } = await scaling(a);
          return self.service_rate > 0 && self.arrival_rate / self.service_rate > 0.7;
        },
        20_000,
        50,
      );
      const seen = [new Set<number>(), new Set<number>()];
      const first = [0, 0];
      await waitFor(
        async () => {
          const now = await both();
          now.forEach((s, i) => {
            if (first[i]) return;
            seen[i]!.add(s.computed_at);
            if (s.desired_replicas >= 2) first[i] = seen[i]!.size;
          });
          return first.every((n) => n > 0);
        },
        20_000,
        50,
      );
      const [sa, sb] = await both();
      process.stdout.write(
        `autoscaling: a at ${sa.desired_replicas} after ${first[0]} decisions, b at ` +
          `${sb.desired_replicas} after ${first[1]} (heartbeat ${HEARTBEAT_MS} ms); a: "${sa.reason}"\n`,
      );
      // The first decision seen may predate the load's measurement: 3 heartbeats and it.
      expect(Math.max(...first)).toBeLessThanOrEqual(4);
      // Both still say so together (the scale-in window holds it), from both instances.
      expect(Math.min(sa.desired_replicas, sb.desired_replicas)).toBeGreaterThanOrEqual(2);
      expect(sa.cluster.instances).toBe(2);
      expect(sb.cluster.instances).toBe(2);
    } finally {
      stop = true;
      await Promise.all(loops);
    }
    // Idle: the arrivals leave the window, then the scale-in window passes.
    const idleAt = Date.now();
    let last: Scaling[] = [];
    await waitFor(
      async () => (last = await both()).every((s) => s.desired_replicas === 1),
      // At the earliest WINDOW_S + STABLE_S; a bound, not a timing claim.
      20_000,
      100,
      () => JSON.stringify(last),
    );
    const [sa, sb] = await both();
    process.stdout.write(`autoscaling: both back to 1 ${Date.now() - idleAt} ms after idle\n`);
    expect(sa.desired_replicas).toBe(sb.desired_replicas);
  });
});
