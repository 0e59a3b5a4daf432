import { jetstream } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { waitFor } from './support/calls';
import { freshBucket } from './support/kv-registry';
import { pause } from './support/wait';
import { serviceWithClient, type ServiceProcess } from './support/service-process';

/**
 * Whatever is written to the roster bucket cannot stop an instance or move its autoscaling
 * signal (found from outside: a single `null` put to `<bucket>_instances` stopped both
 * instances of a cluster within 1.3 s, the scaling timer reading `info.id` of it; a forged
 * heartbeat took desired_replicas from 1 to 16, and a NaN figure made it null).
 */
describe('roster bucket values written by anyone (e2e)', () => {
  const bucket = freshBucket('poison');
  let svc: ServiceProcess;
  let nc: NatsConnection;
  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ svc, nc, close } = await serviceWithClient({
      EPD_REGISTRY_STORE: 'jetstream',
      EPD_KV_BUCKET: bucket,
      EPD_INSTANCE_HEARTBEAT_MS: '200',
    }));
  }, 60_000);
  afterAll(() => close?.());

  it('ignores and logs invalid entries; the instance keeps serving and its signal holds', async () => {
    const kv = await new Kvm(jetstream(nc)).open(`${bucket}_instances`);
    const forgedLoad = {
      arrival_rate: 1e12,
      service_rate: 0.001,
      queue_depth: 1e9,
      oldest_queued_ms: 1e12,
    };
    const heartbeat = (id: string, load: unknown) =>
      JSON.stringify({ id, rank: 0, pid: 1, host: 'h', http_url: '', started_at: 0, load });
    await kv.put('nulled', 'null');
    await kv.put('notjson', '{');
    await kv.put('forged', heartbeat('forged', forgedLoad));
    await kv.put('nan', heartbeat('nan', { ...forgedLoad, arrival_rate: 'NaN' }));
    await kv.put('other-key', heartbeat('not-other-key', undefined));
    // Ten heartbeats and scaling computations later, the process is alive and serving.
    await pause(2_000, 'ten heartbeats and scaling ticks run over the poisoned values');
    expect(svc.proc.exitCode).toBeNull();
    expect((await fetch(`${svc.url}/health/ready`)).status).toBe(200);
    const scaling = (await (await fetch(`${svc.url}/admin/scaling`)).json()) as {
      desired_replicas: number;
      instances: { id: string }[];
    };
    expect(scaling.desired_replicas).toBe(1);
    expect(scaling.instances.map((i) => i.id)).not.toContain('forged');
    const instances = (await (await fetch(`${svc.url}/admin/instances`)).json()) as {
      instances: { id: string }[];
    };
    expect(instances.instances.map((i) => i.id).sort()).toHaveLength(1);
    await waitFor(() => svc.output().includes('roster: ignored an invalid entry'), 5_000);
  }, 30_000);
});
