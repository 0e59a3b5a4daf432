import { createHash } from 'node:crypto';
import { jetstream } from '@nats-io/jetstream';
import { Kvm, KvWatchInclude, type KV } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { CacheStats } from '../src/cache/embedding-cache';
import type { ClaimRecord } from '../src/cache/claims';
import { ReferenceReceiver } from '../src/transfer/reference-receiver';
import { sharedNatsUrl, uniquePrefix } from './support/app';
import { encodeBody, waitFor, type Reply } from './support/calls';
import { freshBucket } from './support/kv-registry';
import { dataUri, image } from './support/media';
import {
  instanceStarter,
  startServiceProcess,
  type Instance,
  type ServiceProcess,
} from './support/service-process';

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const LEASE_MS = 1500;

/**
 * Cluster-wide single flight of the embedding cache: instances (separate processes) that
 * share a JetStream KV bucket claim a missed image before encoding it, and every other
 * request for it, on any instance, joins the owner instead of encoding it again.
 */
describe('embedding cache: single flight across instances (e2e, jetstream)', () => {
  const prefix = uniquePrefix();
  const bucket = freshBucket('cc');
  const started: Instance[] = [];
  let a: Instance;
  let b: Instance;
  let nc: NatsConnection;
  let claims: KV;
  let rx: ReferenceReceiver;
  const frames = new Map<string, Buffer>();
  let seq = 0;
  const id = (tag: string) => `${tag}-${++seq}`;

  const start = instanceStarter(
    {
      prefix,
      kvBucket: bucket,
      natsUrl: sharedNatsUrl(),
      env: {
        EPD_CACHE_MAX_BYTES: String(64 * 1024 * 1024),
        EPD_CACHE_LEASE_MS: String(LEASE_MS),
      },
    },
    started,
  );
  const encodeOn = async (inst: Instance, reqId: string, items: string[]): Promise<Reply> => {
    const msg = await nc.request(
      `${prefix}.v1.inst.${inst.id}.encode`,
      JSON.stringify(encodeBody(reqId, items)),
      { timeout: 30_000 },
    );
    return msg.json<Reply>();
  };
  /** `send` through the queue group: owner routing finds whichever instance staged it. */
  const received = async (reqId: string) => {
    const msg = await nc.request(
      `${prefix}.v1.send`,
      JSON.stringify({ req_id: reqId, prefill_host: '127.0.0.1', embedding_port: rx.port }),
      { timeout: 30_000 },
    );
    expect(msg.json<Reply>().err).toBeUndefined();
    return frames.get(reqId)!;
  };
  const get = async <T>(inst: Instance, path: string) =>
    (await (await fetch(`${inst.svc.url}${path}`)).json()) as T;
  const forwards = async (inst: Instance) =>
    (await get<{ batches: number }>(inst, '/admin/encoder')).batches;
  const stats = (inst: Instance) => get<CacheStats>(inst, '/admin/cache');
  const png = async (seed: number, side = 448) =>
    dataUri(
      await image(side, side, 'png', { r: seed % 256, g: (seed * 7) % 256, b: 99 }),
      'image/png',
    );
  const encodingClaims = async () => {
    const out: ClaimRecord[] = [];
    for await (const key of await claims.keys()) {
      const e = await claims.get(key);
      if (e?.operation === 'PUT') {
        const r = e.json<ClaimRecord>();
        if (r.state === 'encoding') out.push(r);
      }
    }
    return out;
  };

  /** Runs `encode` on `owner` and acts (kill, stop) as soon as its claim is in the bucket. */
  const onClaim = async (owner: Instance, act: () => void) => {
    const watch = await claims.watch({ include: KvWatchInclude.UpdatesOnly });
    const seen = (async () => {
      for await (const e of watch) {
        if (e.operation !== 'PUT') continue;
        const r = e.json<ClaimRecord>();
        if (r.owner.instance === owner.id && r.state === 'encoding') {
          act();
          return true;
        }
      }
      return false;
    })();
    return { seen, stop: () => watch.stop() };
  };

  beforeAll(async () => {
    [a, b] = await Promise.all([start('cca'), start('ccb')]);
    nc = await connect({ servers: sharedNatsUrl() });
    rx = await ReferenceReceiver.start({
      onFrame: ({ header, data }) => void frames.set(header.req_id, Buffer.from(data)),
    });
    // Each instance opens (and the first creates) the claims bucket at start-up.
    // Opened (and its stream checked) inside the wait: the instances create it concurrently.
    const kvm = new Kvm(jetstream(nc));
    const opened = async () => {
      try {
        claims = await kvm.open(`${bucket}_claims`);
        await claims.status();
        return true;
      } catch {
        return false;
      }
    };
    expect(await waitFor(opened, 10_000, 50)).toBe(true);
  }, 60_000);

  afterAll(async () => {
    await Promise.all(started.map((i) => i.svc.stop()));
    await rx.close();
    await nc.close();
  });

  it('10 concurrent requests for one cold image on two instances: one forward in the cluster, identical bytes', async () => {
    const img = await png(1);
    const before = (await forwards(a)) + (await forwards(b));
    const ids = Array.from({ length: 10 }, () => id('cold'));
    const replies = await Promise.all(ids.map((r, i) => encodeOn(i % 2 ? b : a, r, [img])));
    for (const r of replies) expect(r.err).toBeUndefined();
    expect((await forwards(a)) + (await forwards(b)) - before).toBe(1);
    const t = replies.map((r) => r.response!.timings!);
    // One request encoded it; every other one hit, or joined it here or on the other instance.
    expect(t.filter((x) => x.cache_hits === 0 && x.cache_joins === 0)).toHaveLength(1);
    expect(t.filter((x) => x.cache_remote_joins === 1).length).toBeGreaterThanOrEqual(1);
    const shas = new Set<string>();
    for (const r of ids) shas.add(sha(await received(r)));
    expect(shas.size).toBe(1);
    const [sa, sb] = await Promise.all([stats(a), stats(b)]);
    expect(sa.remote_joins + sb.remote_joins).toBeGreaterThanOrEqual(1);
    expect(await encodingClaims()).toEqual([]);
  }, 60_000);

  it('an image cached on one instance is fetched by the other, not encoded again', async () => {
    const img = await png(2);
    const first = await encodeOn(a, id('warm'), [img]);
    expect(first.err).toBeUndefined();
    const before = await forwards(b);
    const again = await encodeOn(b, id('warm'), [img]);
    expect(again.response?.timings).toMatchObject({ cache_remote_joins: 1, batch_size: 0 });
    expect(await forwards(b)).toBe(before);
  });

  it('a failed encode releases its claim: every joiner gets the error, nobody hangs', async () => {
    // A PNG signature with garbage after it: loads (and hashes) fine, fails to decode.
    const bad = dataUri(
      Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), Buffer.alloc(64, 7)]),
      'image/png',
    );
    const replies = await Promise.all(
      Array.from({ length: 6 }, (_, i) => encodeOn(i % 2 ? b : a, id('bad'), [bad])),
    );
    for (const r of replies) expect(r.err?.code).toBe(400);
    expect(await encodingClaims()).toEqual([]);
  });

  it('an owner killed mid-encode: the next request takes the claim over and succeeds', async () => {
    const c = await start('ccc');
    const img = await png(3, 1344);
    const { seen, stop } = await onClaim(c, () => c.svc.proc.kill('SIGKILL'));
    // Its request never gets an answer (the process is gone): not awaited.
    void encodeOn(c, id('doomed'), [img]).catch(() => undefined);
    expect(await seen).toBe(true);
    stop();
    const before = await stats(b);
    const started = Date.now();
    const r = await encodeOn(b, id('after-kill'), [img]);
    expect(r.err).toBeUndefined();
    expect(r.response?.timings).toMatchObject({ cache_hits: 0, batch_size: 1 });
    // The owner's process is gone (no responders): no need to wait out its lease.
    expect(Date.now() - started).toBeLessThan(LEASE_MS * 4);
    expect((await stats(b)).takeovers).toBe(before.takeovers + 1);
  }, 60_000);

  it('an owner that hangs mid-encode and is then killed: a request waiting on it takes over after a lease', async () => {
    const d = await start('ccd');
    const img = await png(4, 1344);
    const { seen, stop } = await onClaim(d, () => d.svc.proc.kill('SIGSTOP'));
    void encodeOn(d, id('hung'), [img]).catch(() => undefined);
    expect(await seen).toBe(true);
    stop();
    const before = await stats(b);
    const started = Date.now();
    const waiting = encodeOn(b, id('after-hang'), [img]);
    // The request is waiting on the owner (it joined its claim; no heartbeats come) when
    // the owner dies.
    await waitFor(async () => (await stats(b)).remote_joins > before.remote_joins);
    d.svc.proc.kill('SIGKILL');
    const r = await waiting;
    const took = Date.now() - started;
    expect(r.err).toBeUndefined();
    expect(r.response?.timings).toMatchObject({ batch_size: 1 });
    // Silent for a lease, then taken over: not the 30 s of the request's own deadline.
    expect(took).toBeGreaterThanOrEqual(LEASE_MS * 0.9);
    expect(took).toBeLessThan(LEASE_MS * 4);
    expect((await stats(b)).takeovers).toBe(before.takeovers + 1);
  }, 60_000);

  it('another min_pixels is another key: an instance with it encodes the image itself', async () => {
    const img = await png(5);
    expect((await encodeOn(a, id('px'), [img])).err).toBeUndefined();
    const e = await start('cce', { EPD_MIN_PIXELS: String(56 * 56 * 4) });
    const r = await encodeOn(e, id('px'), [img]);
    expect(r.response?.timings).toMatchObject({ cache_hits: 0, cache_joins: 0, batch_size: 1 });
  }, 60_000);

  it('another model (EPD_MODEL_PATH) is another key: an instance with it encodes the image itself', async () => {
    const img = await png(6);
    expect((await encodeOn(a, id('model'), [img])).err).toBeUndefined();
    const f = await start('ccf', { EPD_MODEL_PATH: process.env.EPD_TEST_SLOW_MODEL! });
    const r = await encodeOn(f, id('model'), [img]);
    expect(r.response?.timings).toMatchObject({ cache_hits: 0, cache_joins: 0, batch_size: 1 });
    expect(r.response?.embedding_dim).toBe(4096);
  }, 60_000);

  it('the claims settle: none left in flight once every encode is done', async () => {
    expect(await waitFor(async () => (await encodingClaims()).length === 0, 5000)).toBe(true);
  });
});

/**
 * The same single flight across the DP ranks of one instance on the memory store: the
 * supervisor keeps the claims, the ranks fetch each other's rows over NATS.
 */
describe('embedding cache: single flight across DP ranks (e2e, EPD_DP_SIZE=2, memory store)', () => {
  const prefix = uniquePrefix();
  let svc: ServiceProcess;
  let nc: NatsConnection;
  let rx: ReferenceReceiver;
  const frames = new Map<string, Buffer>();

  interface RankStats {
    dp_rank: number;
    stats: { batches: number };
  }
  interface RankCache {
    dp_rank: number;
    cache: CacheStats;
  }
  const get = async <T>(path: string) => (await (await fetch(`${svc.url}${path}`)).json()) as T;
  const forwards = async () =>
    (await get<{ ranks: RankStats[] }>('/admin/encoder')).ranks.reduce(
      (n, r) => n + r.stats.batches,
      0,
    );

  beforeAll(async () => {
    svc = await startServiceProcess({
      EPD_NATS_URL: sharedNatsUrl(),
      EPD_SUBJECT_PREFIX: prefix,
      EPD_DP_SIZE: '2',
      EPD_CACHE_MAX_BYTES: String(64 * 1024 * 1024),
      EPD_CACHE_LEASE_MS: String(LEASE_MS),
    });
    const alive = async () => (await get<{ alive: number }>('/admin/workers')).alive === 2;
    expect(await waitFor(alive, 30_000, 100)).toBe(true);
    nc = await connect({ servers: sharedNatsUrl() });
    rx = await ReferenceReceiver.start({
      onFrame: ({ header, data }) => void frames.set(header.req_id, Buffer.from(data)),
    });
  }, 60_000);

  afterAll(async () => {
    await svc.stop();
    await rx.close();
    await nc.close();
  });

  it('10 concurrent requests for one cold image over both ranks: one forward, identical bytes', async () => {
    const img = dataUri(await image(448, 448, 'png', { r: 12, g: 34, b: 56 }), 'image/png');
    const before = await forwards();
    const ids = Array.from({ length: 10 }, (_, i) => `dp-cold-${i}`);
    const call = async (dp: string, body: object) =>
      (
        await nc.request(`${prefix}.v1.${dp}`, JSON.stringify(body), { timeout: 30_000 })
      ).json<Reply>();
    const replies = await Promise.all(ids.map((r) => call('encode', encodeBody(r, [img]))));
    for (const r of replies) expect(r.err).toBeUndefined();
    expect((await forwards()) - before).toBe(1);
    // Both ranks took requests, and the one that did not encode joined the other's.
    const { ranks } = await get<{ claims_held: number; ranks: RankCache[] }>('/admin/cache');
    expect(
      ranks.every((r) => r.cache.hits + r.cache.joins + r.cache.remote_joins + r.cache.misses > 0),
    ).toBe(true);
    expect(ranks.reduce((n, r) => n + r.cache.remote_joins, 0)).toBeGreaterThanOrEqual(1);
    const shas = new Set<string>();
    for (const r of ids) {
      const sent = await call('send', {
        req_id: r,
        prefill_host: '127.0.0.1',
        embedding_port: rx.port,
      });
      expect(sent.err).toBeUndefined();
      shas.add(sha(frames.get(r)!));
    }
    expect(shas.size).toBe(1);
  }, 60_000);
});
