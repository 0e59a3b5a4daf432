import { connect, type NatsConnection } from '@nats-io/transport-node';
import { waitFor } from './support/calls';
import { NatsServer } from './support/nats-server';
import { startServiceProcess, type ServiceProcess } from './support/service-process';

/**
 * Issue "Cluster failover", defect 2: an instance answered before it could serve. It joined
 * the queue group before its metadata store was open, so a wait_metadata the group gave it
 * was refused (503 "KV bucket … is not open yet") although the other instance would have
 * answered it. Made deterministic here: B's store cannot open at all (its NATS server has
 * no JetStream yet), while A, on its own memory store, serves the same queue group.
 */
describe('an instance serves only once it can (e2e)', () => {
  const prefix = `rd${process.pid}`;
  let nats: NatsServer;
  let a: ServiceProcess;
  let b: ServiceProcess;
  let nc: NatsConnection;

  const request = async (subject: string, body: object) => {
    try {
      const msg = await nc.request(subject, JSON.stringify(body), { timeout: 5000 });
      return msg.json<{ response?: unknown; err?: { type: string; message: string } }>();
    } catch (err) {
      return { transport: (err as Error).message };
    }
  };
  const readyBody = async () => {
    const res = await fetch(`${b.url}/health/ready`);
    return {
      status: res.status,
      body: (await res.json()) as {
        details: { serving?: { status: string; waiting_for?: Record<string, string> } };
      },
    };
  };

  beforeAll(async () => {
    nats = await NatsServer.start({ jetstream: false });
    const common = { EPD_NATS_URL: nats.url, EPD_SUBJECT_PREFIX: prefix };
    a = await startServiceProcess({ ...common, EPD_INSTANCE_ID: 'a' });
    b = await startServiceProcess(
      {
        ...common,
        EPD_INSTANCE_ID: 'b',
        EPD_REGISTRY_STORE: 'jetstream',
        EPD_KV_BUCKET: `rd_${process.pid}`,
        EPD_KV_REPLICAS: '1',
      },
      '/health/live',
    );
    nc = await connect({ servers: nats.url });
  }, 60_000);

  afterAll(async () => {
    await nc?.close();
    await a?.stop();
    await b?.stop();
    await nats?.dispose();
  });

  it('before its store opens, B is out of every subject, /health/ready says what it waits for, and its HTTP calls wait within their deadline', async () => {
    const published = await request(`${prefix}.v1.publish_metadata`, {
      req_id: 'x',
      metadata: { embedding_size: 8, embedding_len: 1, embedding_dim: 2 },
    });
    expect(published).toMatchObject({ response: null });
    // B is up (NATS connected, model loaded) but its store cannot open.
    let last: Awaited<ReturnType<typeof readyBody>> | undefined;
    await waitFor(
      async () => {
        last = await readyBody();
        const waiting = last.body.details.serving?.waiting_for ?? {};
        return waiting['metadata store'] === 'pending' && !('model' in waiting);
      },
      20_000,
      100,
      () => JSON.stringify(last),
    );
    expect(last!.status).toBe(503);
    // Both need JetStream: the store's bucket, and the roster's, where B would announce itself.
    expect(Object.keys(last!.body.details.serving!.waiting_for!).sort()).toEqual([
      'instance roster',
      'metadata store',
    ]);

    // Before: about half of these went to B and were refused with store_unavailable.
    const answers = [];
    for (let i = 0; i < 40; i++) {
      answers.push(await request(`${prefix}.v1.wait_metadata`, { req_id: 'x', timeout_ms: 2000 }));
    }
    const refused = answers.filter((r) => !('response' in r));
    expect({ refused: refused.length, first: refused[0] }).toEqual({
      refused: 0,
      first: undefined,
    });
    // Not on its own subjects either.
    expect(await request(`${prefix}.v1.inst.b.has_metadata`, { req_id: 'x' })).toMatchObject({
      transport: expect.stringMatching(/no responders/i),
    });

    // An HTTP call to B waits for readiness within its deadline, then names what is missing.
    const started = Date.now();
    const res = await fetch(`${b.url}/scheduler_receive_meta_data`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ req_id: 'x', timeout_ms: 300 }),
    });
    const waited = Date.now() - started;
    expect({ status: res.status, body: await res.json() }).toMatchObject({
      status: 503,
      body: { type: 'not_ready', message: expect.stringContaining('metadata store') },
    });
    expect(waited).toBeGreaterThanOrEqual(250);
  }, 60_000);

  it('once its store opens, B joins its subjects and /health/ready turns 200 at that moment', async () => {
    await nats.restart({ jetstream: true });
    await waitFor(async () => (await readyBody()).status === 200, 30_000, 20);
    // Serving the moment it says so: its own subject answers at once.
    const reply = await request(`${prefix}.v1.inst.b.has_metadata`, { req_id: 'y' });
    expect(reply).toMatchObject({ response: { req_id: 'y', present: false } });
  }, 60_000);
});
