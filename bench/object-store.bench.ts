/**
 * The object store tier (EPD_CACHE_STORE=jetstream), in same-run ratios:
 *   1. a store hit against a cold encode, per request, for 448×448 and 1024×768 images:
 *      blocks of images never seen (cold: encoded, then written to the store) and the same
 *      images again after the in-process cache was purged (each one a store hit);
 *   2. the write path: encode throughput of distinct images (every one a miss, and with
 *      the tier, a write) with the tier on against the same service with it off, blocks
 *      alternating;
 *   3. the drain: 100 staged 4 MiB embeddings handed to the cluster at SIGTERM (the time
 *      from the signal to the process's exit) against raw object-store puts of the same
 *      bytes from nats.js, at the drain's concurrency.
 */
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Objm, StorageType } from '@nats-io/obj';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import sharp from 'sharp';
import { chunkBytesFor } from '../src/jetstream/object-layout';
import { NatsServer } from '../test/support/nats-server';
import { QUICK, machine, processOnCpuMs, round, runBench, summarize, writeReport } from './common';
import { startService } from './service-process';

const ROUNDS = QUICK ? 1 : 5;
const BLOCK = QUICK ? 2 : 10;
const TPUT_ROUNDS = QUICK ? 1 : 4;
const TPUT_BLOCK = QUICK ? 6 : 40;
const INFLIGHT = 4;
const STAGED = QUICK ? 5 : 100;
/** The drain's own concurrency (src/handoff/embedding-handoff.service.ts). */
const DRAIN_CONCURRENCY = 4;

let seq = 0;
let colour = 0;
/** A new image each call: nothing cached has its bytes. */
const png = (width: number, height: number) => {
  const i = colour++;
  return sharp({
    create: {
      width,
      height,
      channels: 3,
      background: { r: i % 256, g: (i >> 8) % 256, b: (i * 7 + 3) % 256 },
    },
  })
    .png()
    .toBuffer()
    .then((b) => `data:image/png;base64,${b.toString('base64')}`);
};
const images = (n: number, width: number, height: number) =>
  Promise.all(Array.from({ length: n }, () => png(width, height)));

async function encode(
  nc: NatsConnection,
  prefix: string,
  item: string,
  release = true,
): Promise<{ ms: number; reqId: string; bytes: number }> {
  const reqId = `o-${prefix}-${seq++}`;
  const body = { req_id: reqId, modality: 'image', mm_items: [item], num_parts: 1, part_idx: 0 };
  const t0 = process.hrtime.bigint();
  const msg = await nc.request(`${prefix}.v1.encode`, JSON.stringify(body), { timeout: 60_000 });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  const reply = msg.json<{ err?: unknown; response?: { embedding_size: number } }>();
  if (reply.err) throw new Error(`encode failed: ${JSON.stringify(reply.err)}`);
  if (release) nc.publish(`${prefix}.v1.release`, JSON.stringify({ req_id: reqId }));
  return { ms, reqId, bytes: reply.response!.embedding_size };
}

interface TierView {
  store_hits: number;
  object_store: { queued: number; writes: { ok: number; failed: number; dropped: number } };
}
const view = async (url: string) => (await (await fetch(`${url}/admin/cache`)).json()) as TierView;

async function until(what: string, cond: () => Promise<boolean>, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * The transport's floor for a store hit: the same bytes in NATS request-replies between
 * two nats.js connections of this process, through the same server, cut and asked for as
 * the tier reads an object (its chunk size, all at once).
 */
async function floor(nc: NatsConnection, natsUrl: string, bytes: number, n: number) {
  const peer = await connect({ servers: natsUrl });
  const chunk = chunkBytesFor(nc.info?.max_payload ?? 1024 * 1024);
  const count = Math.ceil(bytes / chunk);
  const payload = new Uint8Array(chunk).map((_, i) => i % 251);
  const last = payload.subarray(0, bytes - (count - 1) * chunk);
  const subject = `floor.${bytes}`;
  peer.subscribe(subject, {
    callback: (_err, m) => void m.respond(m.data[0] === count - 1 ? last : payload),
  });
  await peer.flush();
  const samples: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    await Promise.all(
      Array.from({ length: count }, (_, k) =>
        nc.request(subject, Uint8Array.of(k), { timeout: 10_000 }),
      ),
    );
    samples.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  await peer.close();
  return summarize(samples);
}

/** Part 1 for one image size: cold and store-hit latencies, blocks alternating. */
async function hitVsCold(
  nc: NatsConnection,
  natsUrl: string,
  prefix: string,
  url: string,
  width: number,
  height: number,
) {
  const cold: number[] = [];
  const stored: number[] = [];
  let bytes = 0;
  let hitsBefore = (await view(url)).store_hits;
  for (let r = 0; r < ROUNDS; r++) {
    const block = await images(BLOCK, width, height);
    const written = (await view(url)).object_store.writes.ok;
    for (const img of block) {
      const done = await encode(nc, prefix, img);
      cold.push(done.ms);
      bytes = done.bytes;
    }
    await until('writes', async () => {
      const v = (await view(url)).object_store;
      return v.queued === 0 && v.writes.ok >= written + BLOCK;
    });
    await fetch(`${url}/admin/cache`, { method: 'DELETE' });
    for (const img of block) stored.push((await encode(nc, prefix, img)).ms);
    const hits = (await view(url)).store_hits;
    if (hits - hitsBefore !== BLOCK)
      throw new Error(`expected ${BLOCK} store hits, saw ${hits - hitsBefore}`);
    hitsBefore = hits;
  }
  const sc = summarize(cold);
  const sh = summarize(stored);
  const f = await floor(nc, natsUrl, bytes, ROUNDS * BLOCK);
  return { bytes, cold: sc, hit: sh, floor: f, ratio: sh.p50 / sc.p50, floorRatio: f.p50 / sc.p50 };
}

/** TPUT_BLOCK distinct images at INFLIGHT: encodes per second. */
async function rate(nc: NatsConnection, prefix: string, block: string[]): Promise<number> {
  let next = 0;
  const t0 = process.hrtime.bigint();
  const worker = async () => {
    while (next < block.length) await encode(nc, prefix, block[next++]!);
  };
  await Promise.all(Array.from({ length: INFLIGHT }, worker));
  return block.length / (Number(process.hrtime.bigint() - t0) / 1e9);
}

/**
 * Part 3: STAGED staged 4 MiB embeddings (one 896×896 image: 1,024 tokens × 1,024 × fp32),
 * never sent, on an instance that gets SIGTERM: signal to exit, and the objects it wrote.
 */
async function drain(natsUrl: string, nc: NatsConnection) {
  const env = {
    EPD_NATS_URL: natsUrl,
    EPD_SUBJECT_PREFIX: 'odrain',
    EPD_REGISTRY_STORE: 'jetstream',
    EPD_KV_BUCKET: 'bench_drain',
    EPD_INSTANCE_ID: 'drain-a',
    EPD_CACHE_MAX_BYTES: String(64 * 2 ** 20),
    EPD_CACHE_STORE: 'jetstream',
    EPD_OBJ_BUCKET: 'bench_drain_obj',
    // JetStream reserves each bucket's bound from the server's disk budget (75% of the free
    // disk): the 8 GiB default, twice per service, refused buckets on a fuller disk.
    EPD_OBJ_MAX_BYTES: String(2 * 2 ** 30),
    EPD_STAGING_MAX_BYTES: String(2 * 2 ** 30),
    EPD_DRAIN_MS: '120000',
  };
  const svc = await startService(env);
  const img = await png(896, 896);
  let bytes = 0;
  for (let i = 0; i < STAGED; i++) {
    const { reqId } = await encode(nc, 'odrain', img, false);
    if (i === 0) {
      const meta = await nc.request(
        'odrain.v1.wait_metadata',
        JSON.stringify({ req_id: reqId, timeout_ms: 5000 }),
      );
      bytes = meta.json<{ response: { embedding_size: number } }>().response.embedding_size;
    }
  }
  const exited = new Promise<void>((r) => svc.proc.once('exit', () => r()));
  const t0 = process.hrtime.bigint();
  svc.proc.kill('SIGTERM');
  await exited;
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  const staged = await new Objm(jetstream(nc)).open('bench_drain_obj_staged');
  const written = (await staged.list()).length;
  const jsm = await jetstreamManager(nc);
  await jsm.streams.delete('OBJ_bench_drain_obj_staged');
  await jsm.streams.delete('OBJ_bench_drain_obj');

  // The same bytes, put straight from nats.js at the drain's concurrency.
  const raw = await new Objm(jetstream(nc)).create('bench_raw', {
    storage: StorageType.File,
    replicas: 1,
    max_bytes: 8 * 2 ** 30,
  });
  const payload = new Uint8Array(bytes).map((_, i) => i % 251);
  let next = 0;
  const r0 = process.hrtime.bigint();
  const worker = async () => {
    while (next < STAGED) await raw.putBlob({ name: `raw-${next++}` }, payload);
  };
  await Promise.all(Array.from({ length: DRAIN_CONCURRENCY }, worker));
  const rawMs = Number(process.hrtime.bigint() - r0) / 1e6;
  await jsm.streams.delete('OBJ_bench_raw');
  return { staged: STAGED, bytes, written, ms, rawMs, ratio: ms / rawMs };
}

async function main() {
  const nats = await NatsServer.start();
  const common = {
    EPD_NATS_URL: nats.url,
    EPD_STAGING_MAX_BYTES: String(4 * 2 ** 30),
    EPD_CACHE_MAX_BYTES: String(512 * 2 ** 20),
    EPD_OBJ_MAX_BYTES: String(2 * 2 ** 30), // see drain()
  };
  const on = await startService({
    ...common,
    EPD_SUBJECT_PREFIX: 'oon',
    EPD_CACHE_STORE: 'jetstream',
    EPD_OBJ_BUCKET: 'bench_tier',
  });
  const off = await startService({ ...common, EPD_SUBJECT_PREFIX: 'ooff' });
  if (!nats.pid || !on.proc.pid || !off.proc.pid) throw new Error('no pid to measure');
  const nc = await connect({ servers: nats.url });
  try {
    // Warm-up: both services, both sizes.
    for (const prefix of ['oon', 'ooff'])
      for (const [w, h] of [
        [448, 448],
        [1024, 768],
      ] as const)
        for (const img of await images(3, w, h)) await encode(nc, prefix, img);

    // 1. Store hit against a cold encode.
    const small = await hitVsCold(nc, nats.url, 'oon', on.url, 448, 448);
    const large = await hitVsCold(nc, nats.url, 'oon', on.url, 1024, 768);

    // 2. The write path: tier on against off, blocks alternating.
    // Where the CPU went, per encode: the service's, and the NATS server's (persisting
    // the objects), each block on its own.
    let onRate = 0;
    let offRate = 0;
    const cpu = { onService: 0, onNats: 0, offService: 0, offNats: 0 };
    const natsPid = nats.pid;
    const block = async (prefix: string, pid: number) => {
      const imgs = await images(TPUT_BLOCK, 448, 448);
      const s0 = processOnCpuMs(pid);
      const n0 = processOnCpuMs(natsPid);
      const r = await rate(nc, prefix, imgs);
      return { r, service: processOnCpuMs(pid) - s0, nats: processOnCpuMs(natsPid) - n0 };
    };
    for (let r = 0; r < TPUT_ROUNDS; r++) {
      const off1 = await block('ooff', off.proc.pid);
      const on1 = await block('oon', on.proc.pid);
      // Its writes, made once the block's encodes left the pipeline, end before the next
      // block: they are the tier's cost, not the baseline's.
      await until('writes', async () => (await view(on.url)).object_store.queued === 0);
      offRate += off1.r;
      onRate += on1.r;
      cpu.offService += off1.service;
      cpu.offNats += off1.nats;
      cpu.onService += on1.service;
      cpu.onNats += on1.nats;
    }
    const perEncode = (ms: number) => round(ms / (TPUT_ROUNDS * TPUT_BLOCK), 2);
    const cpuPerEncode = {
      off: { service: perEncode(cpu.offService), nats: perEncode(cpu.offNats) },
      on: { service: perEncode(cpu.onService), nats: perEncode(cpu.onNats) },
    };
    const writes = (await view(on.url)).object_store.writes;
    const tput = onRate / offRate;
    await on.stop();
    await off.stop();

    // 3. The drain.
    const d = await drain(nats.url, nc);

    writeReport({
      name: 'object-store',
      quick: QUICK,
      machine: machine(),
      baseline:
        'a cold encode of the same service (latency), the same service with the tier off (throughput), raw nats.js object-store puts of the same bytes (drain)',
      results: {
        small,
        large,
        throughput: { onRate, offRate, writes, cpuMsPerEncode: cpuPerEncode },
        drain: d,
      },
      targets: [
        {
          metric: 'encode p50, store hit / cold (448x448)',
          target: '≤ 0.3×',
          value: round(small.ratio, 3),
          pass: small.ratio <= 0.3,
        },
        {
          metric: 'encode p50, store hit / cold (1024x768)',
          target: '≤ 0.3×',
          value: round(large.ratio, 3),
          pass: large.ratio <= 0.3,
        },
        {
          metric: `encode throughput of distinct 448x448 images at ${INFLIGHT} in flight, tier on / off`,
          target: '≥ 0.95×',
          value: round(tput, 3),
          pass: tput >= 0.95,
        },
        {
          metric: `drain of ${d.staged} staged ${round(d.bytes / 2 ** 20, 1)} MiB embeddings (SIGTERM to exit) / raw puts of the same bytes`,
          target: 'reported',
          value: round(d.ratio, 2),
          pass: d.written === d.staged,
        },
      ],
      table: [
        ['path', 'p50 ms (p99)', 'ratio'],
        ['448x448, cold', `${round(small.cold.p50)} (${round(small.cold.p99)})`, '1'],
        [
          `448x448: raw NATS request-reply of its ${small.bytes} B (floor)`,
          `${round(small.floor.p50)} (${round(small.floor.p99)})`,
          String(round(small.floorRatio, 3)),
        ],
        [
          '448x448, store hit',
          `${round(small.hit.p50)} (${round(small.hit.p99)})`,
          String(round(small.ratio, 3)),
        ],
        ['1024x768, cold', `${round(large.cold.p50)} (${round(large.cold.p99)})`, '1'],
        [
          `1024x768: raw NATS request-reply of its ${large.bytes} B (floor)`,
          `${round(large.floor.p50)} (${round(large.floor.p99)})`,
          String(round(large.floorRatio, 3)),
        ],
        [
          '1024x768, store hit',
          `${round(large.hit.p50)} (${round(large.hit.p99)})`,
          String(round(large.ratio, 3)),
        ],
        [],
        ['distinct images', 'encodes/s', 'ratio'],
        [
          `tier off (CPU ms per encode: service ${cpuPerEncode.off.service}, nats-server ${cpuPerEncode.off.nats})`,
          String(round(offRate / TPUT_ROUNDS, 1)),
          '1',
        ],
        [
          `tier on, ${writes.ok} written, ${writes.dropped} dropped (CPU ms per encode: service ${cpuPerEncode.on.service}, nats-server ${cpuPerEncode.on.nats})`,
          String(round(onRate / TPUT_ROUNDS, 1)),
          String(round(tput, 3)),
        ],
        [],
        ['drain', 'ms', 'ratio'],
        [`raw nats.js puts, ${d.staged} × ${d.bytes} B`, String(round(d.rawMs)), '1'],
        [
          `SIGTERM to exit, ${d.written} of ${d.staged} handed off`,
          String(round(d.ms)),
          String(round(d.ratio, 2)),
        ],
      ],
    });
  } finally {
    await nc.close();
    await nats.stop();
  }
}

runBench(main);
