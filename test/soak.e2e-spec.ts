import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { sharedNatsUrl, uniquePrefix } from './support/app';
import { encodeBody, waitFor } from './support/calls';
import { dataUri, image } from './support/media';
import { drained } from './support/drained';
import { startServiceProcess, type ServiceProcess } from './support/service-process';

/**
 * Soak: EPD_SOAK_ENCODES encodes (each sent to a receiver-less release) and EPD_SOAK_WAITS
 * metadata waits against the built service, 16 in flight. Every count must be back at
 * zero after the TTL, heap within HEAP_BOUND and RSS within RSS_BOUND of the warmed
 * baseline (all asserted, and reported; `npm run test:reliability` runs 20,000 and
 * 100,000, CI a few hundred). Heap is read
 * after a full collection: the service runs with `--heapsnapshot-signal`, and a heap
 * snapshot (which collects first) is taken before each reading, so garbage not yet
 * collected does not pass for a leak. Nothing in the service changes for it.
 */
const ENCODES = Number(process.env.EPD_SOAK_ENCODES ?? 300);
const WAITS = Number(process.env.EPD_SOAK_WAITS ?? 3000);
const OUT = process.env.EPD_RELIABILITY_OUT;
const TTL_MS = 3000;
const INFLIGHT = 16;
/** After / warmed baseline, after a full collection: above these the soak fails. */
const HEAP_BOUND = 1.15;
const RSS_BOUND = 1.25;

describe(`soak: ${ENCODES} encodes and ${WAITS} waits (e2e, built service)`, () => {
  const prefix = uniquePrefix();
  const snapshots = mkdtempSync(join(tmpdir(), 'epd-soak-heap-'));
  let svc: ServiceProcess;
  let nc: NatsConnection;
  let png: string;

  beforeAll(async () => {
    svc = await startServiceProcess({
      EPD_NATS_URL: sharedNatsUrl(),
      EPD_SUBJECT_PREFIX: prefix,
      EPD_SEND_TIMEOUT_MS: String(TTL_MS),
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${snapshots}`,
    });
    nc = await connect({ servers: sharedNatsUrl() });
    png = dataUri(await image(64, 64, 'png'), 'image/png');
  }, 60_000);

  afterAll(async () => {
    await nc.close();
    await svc.stop();
    rmSync(snapshots, { recursive: true, force: true });
  });

  const call = async (dp: string, data: object) =>
    (await nc.request(`${prefix}.v1.${dp}`, JSON.stringify(data), { timeout: 30_000 })).json<{
      err?: { message: string };
    }>();
  /** Heap in use right after a full collection (a heap snapshot collects first). */
  const heapUsed = async () => {
    process.kill(svc.proc.pid!, 'SIGUSR2');
    const size = () => {
      const f = readdirSync(snapshots).find((n) => n.endsWith('.heapsnapshot'));
      return f ? statSync(join(snapshots, f)).size : -1;
    };
    // Written on the service's main thread: done when the file stops growing.
    let last = -2;
    expect(
      await waitFor(
        () => {
          const now = size();
          const done = now > 0 && now === last;
          last = now;
          return done;
        },
        60_000,
        250,
      ),
    ).toBe(true);
    for (const f of readdirSync(snapshots)) rmSync(join(snapshots, f));
    const text = await (await fetch(`${svc.url}/metrics`)).text();
    return Number(/^nodejs_heap_size_used_bytes (\S+)/m.exec(text)?.[1]);
  };
  /** `n` calls of `one`, INFLIGHT at a time; the errors. */
  const run = async (n: number, one: (i: number) => Promise<{ err?: { message: string } }>) => {
    let next = 0;
    const errors: string[] = [];
    const worker = async () => {
      while (next < n) {
        const r = await one(next++);
        if (r.err) errors.push(r.err.message);
      }
    };
    await Promise.all(Array.from({ length: INFLIGHT }, worker));
    return errors;
  };
  const encodeAndRelease = (tag: string) => async (i: number) => {
    const r = await call('encode', encodeBody(`${tag}-${i}`, [png]));
    await call('release', { req_id: `${tag}-${i}` });
    return r;
  };
  /** A publish, then a wait that it answers: each wait's metadata is fresh (the TTL is short). */
  const waitOne = (tag: string) => async (i: number) => {
    const reqId = `${tag}-${i}`;
    await call('publish_metadata', {
      req_id: reqId,
      metadata: { embedding_size: 4096, embedding_len: 1, embedding_dim: 1024 },
    });
    return call('wait_metadata', { req_id: reqId, timeout_ms: 5000 });
  };

  it('returns every count to zero after the TTL, and keeps heap ≤ 1.15× and RSS ≤ 1.25× of the warmed baseline', async () => {
    // Warm-up: a tenth of the work, then the baseline.
    expect(await run(Math.ceil(ENCODES / 10), encodeAndRelease('warm'))).toEqual([]);
    expect(await run(Math.ceil(WAITS / 10), waitOne('warmw'))).toEqual([]);
    await waitFor(() => drained(svc.url), TTL_MS * 4, 200);
    const base = { heap: await heapUsed(), rss: svc.rss() };

    const started = Date.now();
    const encodeErrors = await run(ENCODES, encodeAndRelease('soak'));
    const waitErrors = await run(WAITS, waitOne('soakw'));
    const seconds = (Date.now() - started) / 1000;
    expect(encodeErrors).toEqual([]);
    expect(waitErrors).toEqual([]);

    const drainedAfterTtl = await waitFor(() => drained(svc.url), TTL_MS * 4, 200);
    const after = { heap: await heapUsed(), rss: svc.rss() };
    const report = {
      encodes: ENCODES,
      waits: WAITS,
      seconds: Math.round(seconds * 10) / 10,
      counts_zero_after_ttl: drainedAfterTtl,
      heap_mb: { baseline: base.heap / 2 ** 20, after: after.heap / 2 ** 20 },
      rss_mb: { baseline: base.rss / 2 ** 20, after: after.rss / 2 ** 20 },
      heap_ratio: after.heap / base.heap,
      rss_ratio: after.rss / base.rss,
      bounds: { heap_ratio: HEAP_BOUND, rss_ratio: RSS_BOUND },
    };
    process.stdout.write(`soak report: ${JSON.stringify(report)}\n`);
    if (OUT) {
      mkdirSync(OUT, { recursive: true });
      writeFileSync(join(OUT, 'soak.json'), JSON.stringify(report, null, 2));
    }
    expect(report.heap_ratio).toBeLessThanOrEqual(HEAP_BOUND);
    expect(report.rss_ratio).toBeLessThanOrEqual(RSS_BOUND);
  }, 900_000);
});
