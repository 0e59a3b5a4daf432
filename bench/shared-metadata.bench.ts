/**
 * The shared metadata store (EPD_REGISTRY_STORE=jetstream), in same-run ratios:
 *   1. wait_metadata for published entries through the service on the KV store, against
 *      the same service on the memory store and against a raw nats.js KV put → watch pair
 *      (the cost of a put reaching another watcher, the mechanism underneath); plus the
 *      throughput of both services at 256 in flight, and the cross-instance wake-up
 *      (publish on one instance, waiter on another);
 *   2. a `send` forwarded from a non-owner to the owner against the same send made
 *      directly to the owner (HTTP, TCP receiver in this process): the hop's added cost;
 *   3. the registry on the KV store with 1k and 100k pending waiters: publish → wake of a
 *      waiter in another process's registry stays flat.
 * Blocks alternate between the compared paths so that machine noise hits both alike.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import sharp from 'sharp';
import { ReferenceReceiver } from '../src/transfer/reference-receiver';
import { freshBucket, kvRegistry } from '../test/support/kv-registry';
import { NatsServer } from '../test/support/nats-server';
import { QUICK, machine, round, runBench, summarize, writeReport, httpJson } from './common';
import { startRawResponder, startService, stopProcess } from './service-process';

const ENTRIES = QUICK ? 200 : 1000;
const ROUNDS = QUICK ? 2 : 12;
const BLOCK = QUICK ? 100 : 200;
const INFLIGHT = 256;
const TPUT = QUICK ? 3_000 : 30_000;
const SENDS = QUICK ? 5 : 40;
const SIZES = QUICK ? [1_000, 5_000] : [1_000, 100_000];
const PROBES = QUICK ? 100 : 1000;
const META = { embedding_size: 4 * 1024 * 1176, embedding_len: 1176, embedding_dim: 1024 };

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;

async function waitBlock(nc: NatsConnection, prefix: string, offset: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < BLOCK; i++) {
    const body = JSON.stringify({ req_id: `e-${(offset + i) % ENTRIES}` });
    const t0 = process.hrtime.bigint();
    const msg = await nc.request(`${prefix}.v1.wait_metadata`, body, { timeout: 5000 });
    out.push(ms(t0));
    if (msg.json<{ err?: unknown }>().err) throw new Error(`error reply: ${msg.string()}`);
  }
  return out;
}

async function throughput(nc: NatsConnection, prefix: string): Promise<number> {
  let next = 0;
  const t0 = process.hrtime.bigint();
  const worker = async () => {
    while (next < TPUT) {
      const body = JSON.stringify({ req_id: `e-${next++ % ENTRIES}` });
      const msg = await nc.request(`${prefix}.v1.wait_metadata`, body, { timeout: 10_000 });
      if (msg.json<{ err?: unknown }>().err) throw new Error(`error reply: ${msg.string()}`);
    }
  };
  await Promise.all(Array.from({ length: INFLIGHT }, worker));
  return TPUT / (ms(t0) / 1000);
}

/** A raw KV put, timed until a watcher on another connection sees it. */
async function rawPairs(url: string, n: number): Promise<number[]> {
  const writer = await connect({ servers: url });
  const reader = await connect({ servers: url });
  const bucket = freshBucket('raw');
  const kvw = await new Kvm(jetstream(writer)).create(bucket, { history: 1 });
  const kvr = await new Kvm(jetstream(reader)).open(bucket);
  const seen = new Map<string, () => void>();
  const watch = await kvr.watch({ include: 'updates' });
  void (async () => {
    for await (const e of watch) seen.get(e.key)?.();
  })();
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const key = `k${i}`;
    const arrived = new Promise<void>((r) => seen.set(key, r));
    const t0 = process.hrtime.bigint();
    await kvw.put(key, JSON.stringify({ metadata: META }));
    await arrived;
    out.push(ms(t0));
    seen.delete(key);
  }
  watch.stop();
  await kvw.destroy();
  await writer.close();
  await reader.close();
  return out;
}

/** publish_metadata on one instance, wait_metadata pending on another: until the waiter's reply. */
async function crossWake(nc: NatsConnection, n: number, offset: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const id = `w-${offset + i}`;
    const waiting = nc.request('k2.v1.wait_metadata', JSON.stringify({ req_id: id }), {
      timeout: 5000,
    });
    await new Promise((r) => setTimeout(r, 1)); // the wait is registered first
    const t0 = process.hrtime.bigint();
    await nc.request('k1.v1.publish_metadata', JSON.stringify({ req_id: id, metadata: META }), {
      timeout: 5000,
    });
    await waiting;
    out.push(ms(t0));
  }
  return out;
}

/**
 * The store is what is measured here, not the overload policy (bench/overload.bench.ts
 * is): with its gate on, one service under 256 calls in flight on a busy machine stepped
 * out of its queue group, alone in it, and the client met "no responders" (fresh-clone CI,
 * with the other lanes running beside it). Same setting on both sides of the ratio.
 */
const NO_SHEDDING = { EPD_OVERLOAD_QUEUE_MS: '0' };

async function part1(nats: NatsServer) {
  const bucket = freshBucket('bench');
  const kvEnv = { EPD_REGISTRY_STORE: 'jetstream', EPD_KV_BUCKET: bucket, ...NO_SHEDDING };
  // The memory-store service starts beside the first KV one; the second KV one after it,
  // once the bucket exists.
  const [mem, k1] = await Promise.all([
    startService({ EPD_NATS_URL: nats.url, EPD_SUBJECT_PREFIX: 'm', ...NO_SHEDDING }),
    startService({ EPD_NATS_URL: nats.url, EPD_SUBJECT_PREFIX: 'k1', ...kvEnv }),
  ]);
  const k2 = await startService({ EPD_NATS_URL: nats.url, EPD_SUBJECT_PREFIX: 'k2', ...kvEnv });
  const nc = await connect({ servers: nats.url });
  try {
    for (const prefix of ['m', 'k1']) {
      for (let i = 0; i < ENTRIES; i++) {
        await nc.request(
          `${prefix}.v1.publish_metadata`,
          JSON.stringify({ req_id: `e-${i}`, metadata: META }),
          { timeout: 5000 },
        );
      }
    }
    // The floor of any NATS request-reply service: a bare nats.js responder process
    // answering the same subject shape with the service's own reply bytes.
    const sample = await nc.request('k1.v1.wait_metadata', JSON.stringify({ req_id: 'e-0' }));
    const bare = await startRawResponder(nats.url, 'b.v1.wait_metadata', sample.string());
    await waitBlock(nc, 'k1', 0);
    await waitBlock(nc, 'm', 0);
    await waitBlock(nc, 'b', 0);
    await rawPairs(nats.url, 100);
    const kv: number[] = [];
    const memory: number[] = [];
    const raw: number[] = [];
    const wake: number[] = [];
    const floor: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      kv.push(...(await waitBlock(nc, 'k1', r * BLOCK)));
      memory.push(...(await waitBlock(nc, 'm', r * BLOCK)));
      floor.push(...(await waitBlock(nc, 'b', r * BLOCK)));
      raw.push(...(await rawPairs(nats.url, BLOCK / 2)));
      wake.push(...(await crossWake(nc, BLOCK / 4, r * BLOCK)));
    }
    const tk: number[] = [];
    const tm: number[] = [];
    for (let r = 0; r < (QUICK ? 1 : 3); r++) {
      tk.push(await throughput(nc, 'k1'));
      tm.push(await throughput(nc, 'm'));
    }
    await stopProcess(bare);
    return {
      kv: summarize(kv),
      memory: summarize(memory),
      floor: summarize(floor),
      raw: summarize(raw),
      wake: summarize(wake),
      tputKv: median(tk),
      tputMemory: median(tm),
    };
  } finally {
    await nc.drain();
    await Promise.all([mem.stop(), k1.stop(), k2.stop()]);
  }
}

async function part2(nats: NatsServer) {
  const env = {
    EPD_NATS_URL: nats.url,
    EPD_SUBJECT_PREFIX: 'hop',
    EPD_REGISTRY_STORE: 'jetstream',
    EPD_KV_BUCKET: freshBucket('hop'),
  };
  const owner = await startService({ ...env, EPD_INSTANCE_ID: 'owner' });
  const peer = await startService({ ...env, EPD_INSTANCE_ID: 'peer' });
  const rx = await ReferenceReceiver.start({ onFrame: () => undefined });
  const png = await sharp({
    create: { width: 448, height: 448, channels: 3, background: { r: 90, g: 120, b: 200 } },
  })
    .png()
    .toBuffer();
  const item = `data:image/png;base64,${png.toString('base64')}`;
  try {
    // The peer must know the owner is alive (roster) before it forwards.
    await new Promise((r) => setTimeout(r, 3000));
    const direct: number[] = [];
    const hop: number[] = [];
    for (let i = 0; i < SENDS + 4; i++) {
      const reqId = `s-${i}`;
      await httpJson(`${owner.url}/encode`, {
        req_id: reqId,
        modality: 'image',
        mm_items: [item],
        num_parts: 1,
        part_idx: 0,
      });
      const via = i % 2 === 0 ? owner : peer;
      const t0 = process.hrtime.bigint();
      await httpJson(`${via.url}/send`, {
        req_id: reqId,
        prefill_host: '127.0.0.1',
        embedding_port: rx.port,
      });
      const t = ms(t0);
      if (i >= 4) (via === owner ? direct : hop).push(t);
    }
    return { direct: summarize(direct), hop: summarize(hop), bytes: 256 * 1024 * 4 };
  } finally {
    await rx.close();
    await Promise.all([owner.stop(), peer.stop()]);
  }
}

async function part3(nats: NatsServer) {
  const rows = [];
  for (const n of SIZES) {
    const bucket = freshBucket('scale');
    const env = {
      EPD_KV_BUCKET: bucket,
      EPD_REGISTRY_MAX_WAITERS: String(n + 100),
      EPD_REQ_TIMEOUT_MS: '3600000',
    };
    const publisher = await kvRegistry(nats.url, env);
    const waiter = await kvRegistry(nats.url, env);
    try {
      const subs = [];
      for (let i = 0; i < n; i++) {
        subs.push(waiter.registry.wait$(`pending-${i}`).subscribe({ error: () => undefined }));
        if (i % 5000 === 4999) await new Promise((r) => setTimeout(r, 10)); // let the gets drain
      }
      for (;;) {
        if ((await waiter.registry.stats()).waiters >= n) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      const samples: number[] = [];
      for (let i = 0; i < PROBES + 50; i++) {
        const id = `probe-${i}`;
        const woken = waiter.registry.wait(id);
        await new Promise((r) => setTimeout(r, 1));
        const t0 = process.hrtime.bigint();
        await publisher.registry.publish(id, META);
        await woken;
        if (i >= 50) samples.push(ms(t0));
      }
      for (const s of subs) s.unsubscribe();
      rows.push({
        n,
        latencyMs: summarize(samples),
        pendingAfter: (await waiter.registry.stats()).waiters,
      });
    } finally {
      await waiter.close({ destroy: false });
      await publisher.close();
    }
  }
  return rows;
}

async function main() {
  const nats = await NatsServer.start();
  try {
    const p1 = await part1(nats);
    const p2 = await part2(nats);
    const p3 = await part3(nats);
    const p50Raw = p1.kv.p50 / p1.raw.p50;
    const tput = p1.tputKv / p1.tputMemory;
    const flat = p3[p3.length - 1]!.latencyMs.p50 / p3[0]!.latencyMs.p50;
    const line = (name: string, s: { p50: number; p99: number; mean: number }, extra = '') => [
      name,
      String(round(s.p50)),
      String(round(s.p99)),
      String(round(s.mean)),
      extra,
    ];
    writeReport({
      name: 'shared-metadata',
      quick: QUICK,
      machine: machine(),
      baseline:
        'raw nats.js KV put → watch pair on the same nats-server; the memory-store service; a direct send to the owner; the smallest waiter count',
      results: { part1: p1, part2: p2, part3: p3 },
      targets: [
        {
          metric: 'wait_metadata (published) p50, KV store / raw KV put → watch pair',
          target: '≤ 1.5×',
          value: round(p50Raw, 2),
          pass: p50Raw <= 1.5,
        },
        {
          metric: `wait_metadata throughput at ${INFLIGHT} in flight, KV store / memory store`,
          target: '≥ 0.5×',
          value: round(tput, 2),
          pass: tput >= 0.5,
        },
        {
          metric: `publish → wake p50 across processes, ${SIZES.at(-1)} / ${SIZES[0]} pending waiters (flat)`,
          target: '≤ 1.5×',
          value: round(flat, 2),
          pass: flat <= 1.5,
        },
      ],
      table: [
        ['path', 'p50 ms', 'p99 ms', 'mean ms', 'note'],
        line(
          'wait_metadata (published), KV store',
          p1.kv,
          `${round(p1.tputKv, 0)} req/s at ${INFLIGHT}`,
        ),
        line(
          'wait_metadata (published), memory store',
          p1.memory,
          `${round(p1.tputMemory, 0)} req/s at ${INFLIGHT}`,
        ),
        line(
          'bare nats.js responder, same reply (request-reply floor)',
          p1.floor,
          `${round(p1.floor.p50 / p1.raw.p50, 2)}x the raw KV pair`,
        ),
        line('raw KV put → watch (other connection)', p1.raw),
        line('publish on one instance → waiter on another wakes', p1.wake),
        line('send, direct to the owner (HTTP, 1 MiB, acked)', p2.direct),
        line(
          'send via a non-owner, forwarded over NATS',
          p2.hop,
          `hop adds ${round(p2.hop.p50 - p2.direct.p50)} ms at p50`,
        ),
        ...p3.map((r) =>
          line(
            `KV registry publish → wake, ${r.n} pending waiters`,
            r.latencyMs,
            `${r.pendingAfter} left after`,
          ),
        ),
      ],
      notes: [
        'One nats-server (JetStream, file store) on loopback; each service is its own process, with load shedding off (EPD_OVERLOAD_QUEUE_MS=0): the store is measured, not the overload policy.',
        `The KV store answers published metadata from its watcher's mirror (a bucket read only for keys it has not seen); the memory store from its Map. Any NATS request-reply pays two hops where the raw KV put → watch pays one: a bare nats.js responder is already ${round(p1.floor.p50 / p1.raw.p50, 2)}x the raw pair, and the KV store ${round(p1.kv.p50 / p1.floor.p50, 2)}x that bare responder.`,
        'Registry scaling: the waiters are in one process, the publisher in another; each wake goes through the KV watcher.',
      ],
    });
  } finally {
    await nats.dispose();
  }
}

runBench(main);
