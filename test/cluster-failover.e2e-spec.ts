import { createHash } from 'node:crypto';
import {
  connect,
  createInbox,
  headers,
  type Msg,
  type NatsConnection,
} from '@nats-io/transport-node';
import { ReferenceReceiver } from '../src/transfer/reference-receiver';
import { encodeBody, waitFor } from './support/calls';
import { dataUri, image } from './support/media';
import { NatsCluster } from './support/nats-cluster';
import { startServiceProcess, type ServiceProcess } from './support/service-process';

/**
 * Issue "Cluster failover": two instances on a 3-node cluster sharing an R3 metadata
 * bucket; receivers' calls carry a short deadline (1.5 s), encodes a longer one. A node
 * is SIGKILLed chosen by its role at that moment (the leader of the bucket's stream, read
 * from JetStream; the node the owner is connected to, read from the owner's own health
 * report), never by list order: nats.js shuffles the server list.
 *
 * What a node loss costs, measured over many losses under load: bench/failover.bench.ts.
 */
describe('cluster failover (e2e)', () => {
  const prefix = `fo${process.pid}`;
  const bucket = `fo_${process.pid}`;
  const stream = `KV_${bucket}`;
  let cluster: NatsCluster;
  let a: ServiceProcess;
  let b: ServiceProcess;
  let rx: ReferenceReceiver;
  let png: Buffer;
  let expectedSha: string;
  const frames = new Map<string, string>();

  const env = (id: string, servers: string[]) => cluster.instanceEnv(id, prefix, bucket, servers);
  /** The short deadline an operator gives receivers' calls (the issue's: 1.5 s). */
  const SHORT = { timeout_ms: 1500 };
  const post = async (svc: ServiceProcess, path: string, body: unknown) => {
    const started = Date.now();
    const res = await fetch(`${svc.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return {
      status: res.status,
      body: (await res.json()) as Record<string, unknown>,
      ms: Date.now() - started,
    };
  };
  const registryStatus = async (svc: ServiceProcess, reqId: string) =>
    (await fetch(`${svc.url}/admin/registry/${encodeURIComponent(reqId)}`)).status;
  /** The node `svc` is connected to now, from its own readiness report. */
  const nodeOf = async (svc: ServiceProcess): Promise<number> => {
    const ready = (await (await fetch(`${svc.url}/health/ready`)).json()) as {
      details: { nats: { server?: string } };
    };
    return cluster.nodeOfUrl(ready.details.nats.server!);
  };
  /** A client on a node that stays up: a receiver's own reconnect is not under test. */
  const clientAvoiding = async (node: number): Promise<NatsConnection> =>
    connect({ servers: cluster.urls.filter((_, i) => i + 1 !== node) });

  /** Kills `node`, runs `during`, then restarts the node and waits for a whole cluster. */
  const withNodeDown = async <T>(node: number, during: () => Promise<T>): Promise<T> => {
    cluster.kill(node);
    try {
      return await during();
    } finally {
      cluster.restart(node);
      await cluster.settled([stream, `${stream}_instances`]);
    }
  };

  beforeAll(async () => {
    cluster = NatsCluster.start(3);
    png = await image(112, 84);
    rx = await ReferenceReceiver.start({
      onFrame: ({ header, data }) =>
        void frames.set(header.req_id, createHash('sha256').update(data).digest('hex')),
    });
    a = await startServiceProcess(env('inst-a', cluster.urls));
    b = await startServiceProcess(env('inst-b', [...cluster.urls].reverse()));
    await cluster.settled([stream, `${stream}_instances`]);
    expect((await post(a, '/encode', encodeBody('warm', [dataUri(png, 'image/png')]))).status).toBe(
      200,
    );
    expect(
      (
        await post(b, '/send', {
          req_id: 'warm',
          prefill_host: '127.0.0.1',
          embedding_port: rx.port,
        })
      ).status,
    ).toBe(200);
    expectedSha = frames.get('warm')!;
  }, 120_000);

  afterAll(async () => {
    await rx?.close();
    await a?.stop();
    await b?.stop();
    await cluster?.stop();
  });

  // Before: the release waited for the stream purge of the metadata, which no replica
  // answers until a new leader is elected (3–9 s), so the caller heard nothing for 5 s.
  it('a release right after the bucket stream leader dies is answered at once, and the req_id reads as absent on both instances', async () => {
    expect((await post(a, '/encode', encodeBody('rel', [dataUri(png, 'image/png')]))).status).toBe(
      200,
    );
    const leader = (await cluster.streamLeader(stream))!;
    await withNodeDown(leader, async () => {
      const nc = await clientAvoiding(leader);
      try {
        const started = Date.now();
        const msg = await nc.request(
          `${prefix}.v1.release`,
          JSON.stringify({ req_id: 'rel', timeout_ms: 1500 }),
          { timeout: 5000 },
        );
        expect({ reply: msg.json(), fast: Date.now() - started < 1500 }).toMatchObject({
          reply: { response: null },
          fast: true,
        });
      } finally {
        await nc.close();
      }
      // Gone for both instances at once, though the stream has no leader to purge it yet.
      expect(await registryStatus(a, 'rel')).toBe(404);
      expect(await registryStatus(b, 'rel')).toBe(404);
    });
    // And the purge landed once a leader was elected: nothing is left in the bucket.
    await waitFor(
      async () => {
        const reg = (await (await fetch(`${a.url}/admin/registry`)).json()) as {
          sharedStore?: { purging: number };
        };
        return reg.sharedStore?.purging === 0;
      },
      15_000,
      100,
    );
    expect(await registryStatus(b, 'rel')).toBe(404);
  }, 60_000);

  // Before: the encode's metadata put found no leader and the encode failed 503
  // store_unavailable, though its deadline had seconds left.
  it('an encode right after the bucket stream leader dies is answered 200 within its deadline: its metadata put is sent again until a new leader takes it', async () => {
    const leader = (await cluster.streamLeader(stream))!;
    const res = await withNodeDown(leader, async () => {
      const enc = await post(a, '/encode', {
        ...encodeBody('elect', [dataUri(png, 'image/png')]),
        timeout_ms: 15_000,
      });
      return enc;
    });
    expect(res).toMatchObject({ status: 200 });
    // Readable through the other instance, and deliverable through it.
    expect(await registryStatus(b, 'elect')).toBe(200);
    const sent = await post(b, '/send', {
      req_id: 'elect',
      prefill_host: '127.0.0.1',
      embedding_port: rx.port,
      ...SHORT,
    });
    expect(sent.status).toBe(200);
    expect(frames.get('elect')).toBe(expectedSha);
  }, 60_000);

  it('send through B right after the node the owner is connected to dies: delivered within the deadline', async () => {
    expect((await post(a, '/encode', encodeBody('conn', [dataUri(png, 'image/png')]))).status).toBe(
      200,
    );
    const sent = await withNodeDown(await nodeOf(a), () =>
      post(b, '/send', {
        req_id: 'conn',
        prefill_host: '127.0.0.1',
        embedding_port: rx.port,
        ...SHORT,
      }),
    );
    expect(sent).toMatchObject({ status: 200, body: { req_id: 'conn', acked: true } });
    expect(frames.get('conn')).toBe(expectedSha);
  }, 60_000);

  // Forwarded calls ask for a receipt, so that a request lost in transit (core NATS drops
  // some in the seconds after a node loss: bench/results/failover.md) is told from a slow
  // answer in 300 ms instead of at the deadline.
  it('a call that asks for a receipt gets one at once, then its answer; one that does not, only the answer', async () => {
    const nc = await connect({ servers: cluster.urls });
    try {
      const replies = async (withReceipt: boolean) => {
        const inbox = createInbox();
        const got: Msg[] = [];
        const sub = nc.subscribe(inbox, { callback: (_e, m) => void got.push(m) });
        const h = headers();
        if (withReceipt) h.set('Epd-Receipt', '1');
        nc.publish(
          `${prefix}.v1.inst.inst-a.has_metadata`,
          JSON.stringify({ req_id: 'never-encoded' }),
          {
            reply: inbox,
            headers: h,
          },
        );
        await waitFor(() => got.length >= (withReceipt ? 2 : 1), 5000);
        await nc.flush();
        sub.unsubscribe();
        return got.map((m) => ({
          receipt: m.headers?.get('Epd-Receipt') ?? null,
          body: m.data.length > 0 ? m.json() : null,
        }));
      };
      expect(await replies(true)).toEqual([
        { receipt: 'received', body: null },
        {
          receipt: null,
          body: expect.objectContaining({ response: { req_id: 'never-encoded', present: false } }),
        },
      ]);
      expect(await replies(false)).toEqual([
        {
          receipt: null,
          body: expect.objectContaining({ response: { req_id: 'never-encoded', present: false } }),
        },
      ]);
    } finally {
      await nc.close();
    }
  });
});
