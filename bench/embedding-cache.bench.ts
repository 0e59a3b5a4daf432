/**
 * The embedding cache (EPD_CACHE_MAX_BYTES), in same-run ratios:
 *   1. a hit against a miss, per request, for a 448×448 image: sequential encodes of
 *      images never seen (misses) and of one seen before (hits), blocks alternating;
 *   2. a pool of 200 images with 80% of the requests going to 20 hot ones, 1,000 requests
 *      at 8 in flight: the service with the cache against the same service without it;
 *   3. duplicate cold requests across two instances sharing a JetStream bucket: every new
 *      image sent to both at the same moment; forwards run ÷ distinct images (1.0 = no
 *      image encoded twice in the cluster).
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { NatsServer } from '../test/support/nats-server';
import { QUICK, machine, round, runBench, summarize, writeReport, distinctPng } from './common';
import { startService } from './service-process';

const ROUNDS = QUICK ? 1 : 8;
const BLOCK = QUICK ? 5 : 20;
const POOL = QUICK ? 40 : 200;
const HOT = QUICK ? 8 : 20;
const REQUESTS = QUICK ? 60 : 1000;
const INFLIGHT = 8;
const DISTINCT = QUICK ? 12 : 200;

let seq = 0;
const png = distinctPng;

async function encode(
  nc: NatsConnection,
  prefix: string,
  item: string,
  instance?: string,
): Promise<number> {
  const reqId = `c-${prefix}-${seq++}`;
  const body = { req_id: reqId, modality: 'image', mm_items: [item], num_parts: 1, part_idx: 0 };
  const subject = instance ? `${prefix}.v1.inst.${instance}.encode` : `${prefix}.v1.encode`;
  const t0 = process.hrtime.bigint();
  const msg = await nc.request(subject, JSON.stringify(body), { timeout: 60_000 });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  const reply = msg.json<{ err?: unknown }>();
  if (reply.err) throw new Error(`encode failed: ${JSON.stringify(reply.err)}`);
  nc.publish(`${prefix}.v1.release`, JSON.stringify({ req_id: reqId }));
  return ms;
}

/** REQUESTS encodes at INFLIGHT, 80% to the hot images: requests per second. */
async function pool(nc: NatsConnection, prefix: string, images: string[]): Promise<number> {
  let next = 0;
  let rnd = 12345;
  const random = () => (rnd = (rnd * 1103515245 + 12345) & 0x7fffffff) / 0x80000000;
  const t0 = process.hrtime.bigint();
  const worker = async () => {
    while (next++ < REQUESTS) {
      const i = random() < 0.8 ? Math.floor(random() * HOT) : Math.floor(random() * images.length);
      await encode(nc, prefix, images[i]!);
    }
  };
  await Promise.all(Array.from({ length: INFLIGHT }, worker));
  return REQUESTS / (Number(process.hrtime.bigint() - t0) / 1e9);
}

/** Requests that went through a forward on the service at `url` (fused ones counted each). */
async function forwarded(url: string): Promise<number> {
  const stats = (await (await fetch(`${url}/admin/encoder`)).json()) as {
    batchSizes: Record<string, number>;
  };
  return Object.entries(stats.batchSizes).reduce((n, [size, count]) => n + Number(size) * count, 0);
}

async function ready(url: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if ((await fetch(`${url}/health/ready`)).status === 200) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not become ready`);
}

/**
 * Two instances on one JetStream bucket; each of DISTINCT new images is sent to both at
 * once, INFLIGHT pairs at a time: the cluster's forwarded requests ÷ DISTINCT.
 */
async function duplicates(natsUrl: string, images: string[]) {
  const env = {
    EPD_NATS_URL: natsUrl,
    EPD_SUBJECT_PREFIX: 'cdup',
    EPD_REGISTRY_STORE: 'jetstream',
    EPD_KV_BUCKET: 'bench_dup',
    EPD_CACHE_MAX_BYTES: String(512 * 2 ** 20),
    EPD_STAGING_MAX_BYTES: String(8 * 2 ** 30),
  };
  const a = await startService({ ...env, EPD_INSTANCE_ID: 'dup-a' });
  const b = await startService({ ...env, EPD_INSTANCE_ID: 'dup-b' });
  const nc = await connect({ servers: natsUrl });
  try {
    await Promise.all([ready(a.url), ready(b.url)]);
    for (let i = 0; i < 10; i++) await encode(nc, 'cdup', images[i]!, i % 2 ? 'dup-b' : 'dup-a');
    const before = (await forwarded(a.url)) + (await forwarded(b.url));
    const pairs: number[] = [];
    let next = 10;
    const worker = async () => {
      while (next < images.length) {
        const img = images[next++]!;
        const t0 = process.hrtime.bigint();
        await Promise.all([encode(nc, 'cdup', img, 'dup-a'), encode(nc, 'cdup', img, 'dup-b')]);
        pairs.push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
    };
    await Promise.all(Array.from({ length: INFLIGHT }, worker));
    const runs = (await forwarded(a.url)) + (await forwarded(b.url)) - before;
    const view = async (url: string) =>
      (await (await fetch(`${url}/admin/cache`)).json()) as {
        remote_joins: number;
        joins: number;
        takeovers: number;
      };
    const [va, vb] = await Promise.all([view(a.url), view(b.url)]);
    return {
      distinct: images.length - 10,
      forwarded: runs,
      ratio: runs / (images.length - 10),
      pair: summarize(pairs),
      remoteJoins: va.remote_joins + vb.remote_joins,
      takeovers: va.takeovers + vb.takeovers,
    };
  } finally {
    await nc.close();
    await a.stop();
    await b.stop();
  }
}

async function main() {
  const images = await Promise.all(
    Array.from({ length: POOL + ROUNDS * BLOCK + DISTINCT + 10 }, (_, i) => png(i)),
  );
  const cold = images.slice(POOL, POOL + ROUNDS * BLOCK); // never repeated: each one misses
  const fresh = images.slice(POOL + ROUNDS * BLOCK); // for the two-instance run
  const nats = await NatsServer.start();
  const common = { EPD_NATS_URL: nats.url, EPD_STAGING_MAX_BYTES: String(8 * 2 ** 30) };
  const on = await startService({
    ...common,
    EPD_SUBJECT_PREFIX: 'con',
    EPD_CACHE_MAX_BYTES: String(512 * 2 ** 20),
  });
  const off = await startService({ ...common, EPD_SUBJECT_PREFIX: 'coff' });
  const nc = await connect({ servers: nats.url });
  try {
    // 1. Hit against miss.
    const hot = images[0]!;
    for (let i = 0; i < 20; i++) await encode(nc, 'con', images[1 + (i % 5)]!); // warm-up
    await encode(nc, 'con', hot);
    const miss: number[] = [];
    const hit: number[] = [];
    let c = 0;
    for (let r = 0; r < ROUNDS; r++) {
      for (let i = 0; i < BLOCK; i++) miss.push(await encode(nc, 'con', cold[c++]!));
      for (let i = 0; i < BLOCK; i++) hit.push(await encode(nc, 'con', hot));
    }
    const sm = summarize(miss);
    const sh = summarize(hit);
    const hitRatio = sh.p50 / sm.p50;

    // 2. 80% repeats, cache on against off.
    await pool(nc, 'coff', images.slice(0, POOL)); // warm-up of the same shape
    const rateOff = await pool(nc, 'coff', images.slice(0, POOL));
    type CacheView = { hits: number; misses: number; entries: number };
    const cacheNow = async () => (await (await fetch(`${on.url}/admin/cache`)).json()) as CacheView;
    const beforePool = await cacheNow();
    const rateOn = await pool(nc, 'con', images.slice(0, POOL));
    const afterPool = await cacheNow();
    // This phase's own hits and misses: not part 1's misses, nor its warm-up's.
    const poolHits = afterPool.hits - beforePool.hits;
    const poolMisses = afterPool.misses - beforePool.misses;
    const cacheView = {
      ...afterPool,
      pool_hits: poolHits,
      pool_misses: poolMisses,
      pool_hit_ratio: round(poolHits / Math.max(1, poolHits + poolMisses), 3),
    };
    const tputRatio = rateOn / rateOff;
    await on.stop();
    await off.stop();

    // 3. Duplicate cold requests across two instances.
    const dup = await duplicates(nats.url, fresh);

    writeReport({
      name: 'embedding-cache',
      quick: QUICK,
      machine: machine(),
      baseline:
        'a miss of the same service (latency), and the same service without the cache (throughput)',
      results: {
        image: '448x448 PNG',
        hit: sh,
        miss: sm,
        pool: { images: POOL, hot: HOT, requests: REQUESTS, inflight: INFLIGHT, rateOn, rateOff },
        cache: cacheView,
        duplicates: dup,
      },
      targets: [
        {
          metric: 'encode p50, hit / miss (448x448)',
          target: '≤ 0.2× (SGLang: 4.9× faster on a hit)',
          value: round(hitRatio, 3),
          pass: hitRatio <= 0.2,
        },
        {
          metric: `throughput, ${POOL} images with 80% repeats at ${INFLIGHT} in flight, cache on / off`,
          target: '≥ 1.5× (Dynamo reports 1.16×)',
          value: round(tputRatio, 2),
          pass: tputRatio >= 1.5,
        },
        {
          metric: `forwards run ÷ distinct images, ${dup.distinct} new images each sent to two instances at once`,
          target: '= 1.0 (vLLM: "concurrent cold requests may still encode the same image")',
          value: round(dup.ratio, 3),
          pass: dup.ratio === 1,
        },
      ],
      table: [
        ['path', 'p50 ms (p99)', 'ratio'],
        ['encode, miss', `${round(sm.p50)} (${round(sm.p99)})`, '1'],
        ['encode, hit', `${round(sh.p50)} (${round(sh.p99)})`, String(round(hitRatio, 3))],
        [],
        ['80% repeats', 'requests/s', 'ratio'],
        ['cache off', String(round(rateOff, 1)), '1'],
        [
          `cache on (hit ratio ${cacheView.pool_hit_ratio} in this phase)`,
          String(round(rateOn, 1)),
          String(round(tputRatio, 2)),
        ],
        [],
        ['two instances, duplicate cold requests', 'forwards', 'per distinct image'],
        [
          `${dup.distinct} images × 2 (pair p50 ${round(dup.pair.p50)} ms; ${dup.remoteJoins} remote joins)`,
          String(dup.forwarded),
          String(round(dup.ratio, 3)),
        ],
      ],
      notes: [
        'A hit skips decode, preprocessing and the forward: load, hash (sha256 of the bytes), stage, publish.',
        'Two instances: each claims a missed image in the KV bucket <bucket>_claims before encoding it; the other joins the owner and fetches the rows over NATS.',
      ],
    });
  } finally {
    await nc.close();
    await on.stop();
    await off.stop();
    await nats.stop();
  }
}

runBench(main);
