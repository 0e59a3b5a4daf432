import { expectOk } from './support/wait';
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import sharp from 'sharp';
import { ReferenceReceiver } from '../src/transfer/reference-receiver';
import { sharedNatsUrl, startTestApp, uniquePrefix, type TestApp } from './support/app';
import { encodeBody, waitFor, type Reply } from './support/calls';
import { freshBucket } from './support/kv-registry';
import { dataUri, image } from './support/media';
import type { WorkerView } from '../src/dispatch/worker-supervisor.service';
import { freePort } from './support/nats-server';
import { exited, startServiceProcess, type ServiceProcess } from './support/service-process';
import { recordFault } from './support/fault-report';
import { CallLedger, leftBehindAfterTtl, namesLoss } from './support/ledger';
import { METRICS, type MetricSpec } from '../src/metrics/catalogue';

interface Workers {
  dp_size: number;
  alive: number;
  workers: WorkerView[];
}

/** Media that answers only when told: encodes fetching it stay pending on their rank. */
class HeldMedia {
  private readonly held = new Set<ServerResponse>();
  private constructor(private readonly server: Server) {}

  static async start(): Promise<HeldMedia> {
    const server = createServer();
    const media = new HeldMedia(server);
    server.on('request', (_req: IncomingMessage, res: ServerResponse) => media.held.add(res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    return media;
  }

  url(name: string): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/${name}.png`;
  }

  get count(): number {
    return this.held.size;
  }

  /** Answers every held fetch with 404: their encodes fail with a 4xx and settle. */
  release(): void {
    for (const res of this.held) res.writeHead(404).end();
    this.held.clear();
  }

  async close(): Promise<void> {
    this.release();
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

/** Waits until every one of a service's DP workers is alive (GET /admin/workers). */
const allAlive = (url: string, headers: Record<string, string> = {}) =>
  waitFor(
    async () => {
      const w = (await (await fetch(`${url}/admin/workers`, { headers })).json()) as Workers;
      return w.alive === w.dp_size;
    },
    30_000,
    100,
  );
const alive = (pid: number) => !exited(pid);
/** Staged-embedding and registry-entry TTL of the DP suite's service. */
const TTL_MS = 10_000;

describe('DP workers: EPD_DP_SIZE=2 under one supervisor (e2e)', () => {
  let svc: ServiceProcess;
  let nc: NatsConnection;
  let media: HeldMedia;
  let prefix: string;
  let item: string;
  let otherItem: string;
  let seq = 0;

  const nextId = (tag: string) => `${tag}-${++seq}`;
  const call = async (dp: string, data: unknown, subject?: string): Promise<Reply> =>
    (
      await nc.request(subject ?? `${prefix}.v1.${dp}`, JSON.stringify(data), { timeout: 30_000 })
    ).json<Reply>();
  const workers = async (): Promise<Workers> =>
    (await fetch(`${svc.url}/admin/workers`)).json() as Promise<Workers>;
  const ownerRank = async (reqId: string): Promise<number | undefined> => {
    const r = await fetch(`${svc.url}/admin/registry/${reqId}`);
    const body = (await r.json()) as { owner?: { rank?: number } };
    return body.owner?.rank;
  };
  const bothAlive = () => allAlive(svc.url);
  const encode = (reqId: string, mmItem = item) => call('encode', encodeBody(reqId, [mmItem]));
  /** An encode that stays pending (its media is held), settled by media.release(). */
  const hold = (reqId: string) => encode(reqId, media.url(reqId));

  beforeAll(async () => {
    media = await HeldMedia.start();
    prefix = uniquePrefix();
    svc = await startServiceProcess({
      EPD_NATS_URL: sharedNatsUrl(),
      EPD_SUBJECT_PREFIX: prefix,
      EPD_DP_SIZE: '2',
      EPD_MAX_PENDING: '2',
      EPD_ALLOWED_MEDIA_DOMAINS: '127.0.0.1',
      EPD_MEDIA_ALLOW_PRIVATE_NETWORKS: 'true',
      EPD_SEND_TIMEOUT_MS: String(TTL_MS),
    });
    nc = await connect({ servers: sharedNatsUrl() });
    item = dataUri(await image(112, 84, 'png', { r: 200, g: 30, b: 90 }), 'image/png');
    otherItem = dataUri(await image(84, 112, 'png', { r: 10, g: 130, b: 40 }), 'image/png');
    expect(await bothAlive()).toBe(true);
  }, 60_000);

  afterAll(async () => {
    await media?.close();
    await nc?.close();
    await svc?.stop();
  });

  afterEach(async () => {
    media.release();
    // Every call settled: nothing left pending on any rank.
    expect(await waitFor(async () => (await workers()).workers.every((w) => w.pending === 0))).toBe(
      true,
    );
  });

  it('starts two workers with their thread settings, under the supervisor by PID', async () => {
    const w = await workers();
    expect(w.dp_size).toBe(2);
    expect(w.workers.map((x) => x.dp_rank)).toEqual([0, 1]);
    for (const x of w.workers) {
      expect(x.pid).not.toBe(svc.proc.pid);
      expect(alive(x.pid!)).toBe(true);
    }
    const body = (await (await fetch(`${svc.url}/admin/workers`)).json()) as {
      threads: { intraOpThreads: number; preprocessThreads: number };
    };
    expect(body.threads.intraOpThreads).toBeGreaterThanOrEqual(1);
    expect(body.threads.preprocessThreads).toBe(1);
  });

  it('dispatches ties round-robin and otherwise to the least pending rank', async () => {
    // Idle: every encode is a tie, and the cursor alternates ranks.
    const ranks: number[] = [];
    for (let i = 0; i < 4; i++) {
      const id = nextId('rr');
      expectOk(await encode(id));
      ranks.push((await ownerRank(id))!);
    }
    expect(ranks[0]).not.toBe(ranks[1]);
    expect(ranks[2]).toBe(ranks[0]);
    expect(ranks[3]).toBe(ranks[1]);

    // One rank busy with a held encode: the next encodes all go to the other one.
    const held = hold(nextId('held'));
    expect(await waitFor(async () => (await workers()).workers.some((w) => w.pending === 1))).toBe(
      true,
    );
    const busy = (await workers()).workers.find((w) => w.pending === 1)!.dp_rank;
    for (let i = 0; i < 3; i++) {
      const id = nextId('lp');
      expectOk(await encode(id));
      expect(await ownerRank(id)).toBe(1 - busy);
    }
    media.release();
    expect((await held).err?.code).toBe(400);
  });

  it('answers a duplicate active req_id with 409 across ranks, and 503 naming the cap when all are full', async () => {
    const dup = nextId('dup');
    const first = hold(dup);
    expect(await waitFor(() => media.count === 1)).toBe(true);
    const again = await encode(dup);
    expect(again.err).toMatchObject({ code: 409, type: 'duplicate_request' });

    // EPD_MAX_PENDING=2 per rank: three more held fill both ranks.
    const more = [hold(nextId('cap')), hold(nextId('cap')), hold(nextId('cap'))];
    expect(await waitFor(() => media.count === 4)).toBe(true);
    const full = await encode(nextId('full'));
    expect(full.err).toMatchObject({ code: 503, type: 'at_capacity' });
    expect(full.err?.message).toMatch(
      /all 2 encoder DP workers are at capacity.*EPD_MAX_PENDING=2/,
    );
    media.release();
    await Promise.all([first, ...more]);
    // A completed req_id may be encoded again (reuse after release).
    expect((await call('release', { req_id: dup })).err).toBeUndefined();
  });

  it('routes every per-req_id call to the owning rank, over NATS and HTTP', async () => {
    const got: { reqId: string; sha: string }[] = [];
    const rx = await ReferenceReceiver.start({
      onFrame: ({ header, data }) => void got.push({ reqId: header.req_id, sha: sha(data) }),
    });
    try {
      const a = nextId('own');
      const b = nextId('own');
      await encode(a);
      await encode(b, otherItem);
      expect(new Set([await ownerRank(a), await ownerRank(b)]).size).toBe(2);
      for (const id of [a, b]) {
        const meta = await call('wait_metadata', { req_id: id });
        expect(meta.response).toMatchObject({ req_id: id, embedding_dim: 1024 });
        expect((await call('has_metadata', { req_id: id })).response).toEqual({
          req_id: id,
          present: true,
        });
        const status = await call('send_status', { req_id: id });
        expect(status.response).toMatchObject({ req_id: id, state: 'staged' });
        const sent = await call('send', {
          req_id: id,
          prefill_host: '127.0.0.1',
          embedding_port: rx.port,
        });
        expect(sent.response).toMatchObject({ req_id: id, acked: true });
      }
      const http = await fetch(`${svc.url}/admin/requests/${a}`);
      expect(http.status).toBe(200);
      expect(got.map((g) => g.reqId)).toEqual([a, b]);
      expect(got[0]!.sha).not.toBe(got[1]!.sha);
    } finally {
      await rx.close();
    }
  });

  it('delivers the bytes one process would, whichever rank encoded', async () => {
    // The same image on both ranks and on a single-process app: the same embedding.
    let single: TestApp | undefined;
    const got = new Map<string, string>();
    const rx = await ReferenceReceiver.start({
      onFrame: ({ header, data }) => void got.set(header.req_id, sha(data)),
    });
    try {
      single = await startTestApp();
      const ids = [nextId('bytes'), nextId('bytes')];
      for (const id of ids) await encode(id);
      expect(new Set(await Promise.all(ids.map(ownerRank))).size).toBe(2);
      for (const id of ids) {
        const sent = await call('send', {
          req_id: id,
          prefill_host: '127.0.0.1',
          embedding_port: rx.port,
        });
        expect(sent.err).toBeUndefined();
      }
      const ref = nextId('bytes-single');
      const p = single.config.nats.subjectPrefix;
      await call('encode', encodeBody(ref, [item]), `${p}.v1.encode`);
      await call(
        'send',
        { req_id: ref, prefill_host: '127.0.0.1', embedding_port: rx.port },
        `${p}.v1.send`,
      );
      expect(got.get(ids[0]!)).toBe(got.get(ref));
      expect(got.get(ids[1]!)).toBe(got.get(ref));
    } finally {
      await rx.close();
      await single?.close();
    }
  });

  it('takes an HTTP encode larger than the NATS max_payload (dispatch is over IPC)', async () => {
    // 1300×1000 of noise: ~3.9 MB of PNG, ~5.2 MB as a data URI, over the 4 MiB max_payload.
    const noise = Buffer.alloc(1300 * 1000 * 3);
    for (let i = 0; i < noise.length; i++) noise[i] = (i * 2654435761) >>> 24;
    const png = await sharp(noise, { raw: { width: 1300, height: 1000, channels: 3 } })
      .png({ compressionLevel: 0 })
      .toBuffer();
    const id = nextId('big');
    const body = JSON.stringify(encodeBody(id, [dataUri(png, 'image/png')]));
    expect(body.length).toBeGreaterThan(4 * 1024 * 1024);
    const r = await fetch(`${svc.url}/encode`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ req_id: id, embedding_dim: 1024 });
    expect(await ownerRank(id)).toBeGreaterThanOrEqual(0);
    // Its errors come back as they would over NATS: a duplicate is still a 409.
    const again = await fetch(`${svc.url}/encode`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    expect(again.status).toBe(409);
  });

  it('refuses an encode of a req_id released before it began, with 409', async () => {
    const id = nextId('tomb');
    expect((await call('release', { req_id: id })).err).toBeUndefined();
    const r = await encode(id);
    expect(r.err).toMatchObject({ code: 409, type: 'released' });
    const wait = await call('wait_metadata', { req_id: id, timeout_ms: 1000 });
    expect(wait.err?.message).toMatch(/released/);
  });

  it('answers health_encode and the profiles with one line per rank', async () => {
    const health = await call('health_encode', {});
    expect(health.response).toMatchObject({ ok: true, source: 'dp' });
    expect(String(health.response?.msg)).toMatch(/^dp_rank=0: ok .*\ndp_rank=1: ok /);

    const start = await call('start_profile', { num_steps: 1000 });
    expect(String(start.response?.msg)).toMatch(/^dp_rank=0: Start profiling.*\ndp_rank=1: Start/);
    // Already running on every rank: each says so, and the status is that 400.
    const twice = await call('start_profile', {});
    expect(twice.err).toMatchObject({ code: 400 });
    expect(twice.err?.message).toMatch(/dp_rank=0: 400 profiling already running\ndp_rank=1: 400/);
    const stop = await call('stop_profile', {});
    expect(String(stop.response?.msg)).toMatch(/^dp_rank=0: Stop profiling.*\ndp_rank=1: Stop/s);
    const http = await fetch(`${svc.url}/health_generate`);
    expect(http.status).toBe(200);
  });

  it('serves a rank subject directly, and aggregates every rank in /metrics', async () => {
    const id = nextId('direct');
    const r = await call('encode', encodeBody(id, [item]), `${prefix}.v1.rank.1.encode`);
    expect(r.response).toMatchObject({ req_id: id });
    expect(await ownerRank(id)).toBe(1);
    const metrics = await (await fetch(`${svc.url}/metrics`)).text();
    expect(metrics).toMatch(/epd_encoder_requests_total\{[^}]*dp_rank="0"[^}]*\} [1-9]/);
    expect(metrics).toMatch(/epd_encoder_requests_total\{[^}]*dp_rank="1"[^}]*\} [1-9]/);
    expect(metrics).toMatch(/epd_encoder_dp_workers\{state="alive"\} 2/);
    expect(metrics).toMatch(/epd_encoder_dp_dispatched_total\{dp_rank="0"\} [1-9]/);
    expect(metrics).toMatch(/^epd_encoder_dp_metrics_scraped\{dp_rank="0"\} 1$/m);
    expect(metrics).toMatch(/^epd_encoder_dp_metrics_scraped\{dp_rank="1"\} 1$/m);
    // Every catalogued family, the supervisor's own included (the cache is off here).
    const exported = new Set([...metrics.matchAll(/^# TYPE (epd_\w+) /gm)].map((m) => m[1]));
    const expected = Object.entries(METRICS as Record<string, MetricSpec>)
      // Not the cache's (off here), nor the vLLM face's (one process only).
      .filter(([, m]) => !m.only?.startsWith('EPD_CACHE') && !m.only?.startsWith('one process'))
      .map(([name]) => name);
    expect(expected.filter((name) => !exported.has(name))).toEqual([]);
  });

  it("reports the instance's autoscaling signal from its workers' load, summed", async () => {
    for (let i = 0; i < 4; i++) expect((await encode(`scale-${i}`)).err).toBeUndefined();
    type View = { desired_replicas: number; self: { service_rate: number; arrival_rate: number } };
    let view: View | undefined;
    // The supervisor gathers its workers' figures once a heartbeat.
    await waitFor(async () => {
      view = (await (await fetch(`${svc.url}/admin/scaling`)).json()) as View;
      return view.self.service_rate > 0;
    });
    expect(view!.self.arrival_rate).toBeGreaterThan(0);
    expect(view!.desired_replicas).toBeGreaterThanOrEqual(1);
  });

  it('shows one dashboard row per rank (the event stream reads every worker’s metrics)', async () => {
    const abort = new AbortController();
    const res = await fetch(`${svc.url}/admin/events`, { signal: abort.signal });
    expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
    const reader = res.body!.getReader();
    let buffered = '';
    let snapshot: { ranks: { rank: string; encodes: number }[] } | undefined;
    while (!snapshot) {
      const { value, done } = await reader.read();
      if (done) break;
      buffered += Buffer.from(value).toString();
      const m = /event: snapshot\n(?:id: .*\n)?data: (.*)\n/.exec(buffered);
      if (m) snapshot = JSON.parse(m[1]!) as typeof snapshot;
    }
    abort.abort();
    expect(snapshot!.ranks.map((r) => r.rank)).toEqual(['0', '1']);
    expect(snapshot!.ranks.every((r) => r.encodes > 0)).toBe(true);
  });

  it('fails a killed worker’s pending calls at once, sends new traffic to the survivor, and respawns it', async () => {
    const staged = nextId('lost');
    await encode(staged);
    const victim = (await ownerRank(staged))!;
    const before = (await workers()).workers[victim]!;

    // Two encodes held on the victim (the other rank busy with one, so they land there).
    const ledger = new CallLedger();
    const pinned: { id: string; reply: Promise<Reply | undefined> }[] = [];
    while ((await workers()).workers[victim]!.pending < 2) {
      const id = nextId('pin');
      pinned.push({ id, reply: ledger.nats('encode', 20_000, () => hold(id)) });
      await waitFor(() => media.count === pinned.length);
    }
    const settled: { r: Reply; at: number }[] = [];
    for (const p of pinned) void p.reply.then((r) => r && settled.push({ r, at: Date.now() }));

    const killedAt = Date.now();
    ledger.markFault();
    process.kill(before.pid!, 'SIGKILL');
    // The victim's two calls fail at once; any held on the other rank stay pending.
    expect(await waitFor(() => settled.length >= 2, 5000)).toBe(true);
    expect(settled).toHaveLength(2);
    for (const d of settled) {
      expect(d.r.err).toMatchObject({
        code: 503,
        type: 'worker_died',
        message: `DP worker rank=${victim} died (exitcode=-9)`,
      });
      expect(d.at - killedAt).toBeLessThan(1000);
    }
    // A scrape while it is down (its respawn takes seconds: a process, Nest, the models)
    // says that its series are left out, rank by rank.
    const survivor = 1 - victim;
    const scraped = await (await fetch(`${svc.url}/metrics`)).text();
    expect(scraped).toMatch(
      new RegExp(`^epd_encoder_dp_metrics_scraped\\{dp_rank="${victim}"\\} 0$`, 'm'),
    );
    expect(scraped).toMatch(
      new RegExp(`^epd_encoder_dp_metrics_scraped\\{dp_rank="${survivor}"\\} 1$`, 'm'),
    );
    media.release(); // the survivor's held calls (if any) settle: it has room again
    expect(await waitFor(async () => (await workers()).workers[survivor]!.pending === 0)).toBe(
      true,
    );
    // While it is down, new encodes go to the survivor.
    const during = nextId('during');
    expect((await encode(during)).err).toBeUndefined();
    expect(await ownerRank(during)).toBe(survivor);
    // Its staged embedding is gone: calls for it, and its waiters, are told so at once.
    const lost = new RegExp(
      `^staged embedding for req_id=${staged} was lost \\(encoder restarted: DP worker rank=${victim} \\(pid ${before.pid}\\)`,
    );
    const send = await call('send', {
      req_id: staged,
      prefill_host: '127.0.0.1',
      embedding_port: 9,
    });
    expect(send.err).toMatchObject({ code: 503, type: 'embedding_lost' });
    expect(send.err?.message).toMatch(lost);
    expect(
      await waitFor(async () => {
        const w = await call('wait_metadata', { req_id: staged, timeout_ms: 1000 });
        return lost.test(String(w.err?.message));
      }),
    ).toBe(true);

    // It comes back: a new process, counted, and serving.
    expect(await bothAlive()).toBe(true);
    const after = (await workers()).workers[victim]!;
    expect(after.pid).not.toBe(before.pid);
    expect(after.restarts).toBe(before.restarts + 1);
    expect(after.last_exit_code).toBe(-9);
    await Promise.all(pinned.map((p) => p.reply));
    expect(svc.output()).toMatch(
      new RegExp(`DP worker rank=${victim} died \\(exitcode=-9\\); respawning`),
    );
    // Nothing acked was lost unsaid: the staged embedding's calls name its loss, and a
    // pinned encode answered ok (held on the survivor) has its metadata readable.
    const waitLost = await call('wait_metadata', { req_id: staged, timeout_ms: 1000 });
    let silentlyLost = [send, waitLost].some((r) => !namesLoss(r)) ? 1 : 0;
    for (const p of pinned) {
      if ((await p.reply)?.err !== undefined) continue;
      const meta = await call('wait_metadata', { req_id: p.id, timeout_ms: 1000 });
      if (meta.response?.embedding_len === undefined) silentlyLost++;
    }
    const ids = [staged, during, ...pinned.map((p) => p.id)];
    for (const id of ids) await call('release', { req_id: id });
    recordFault('dp-worker-sigkill', {
      fault: 'DP worker SIGKILLed with 2 encodes in flight (and 1 embedding staged on it)',
      ledger,
      silentlyLost,
      // Error metadata (lost, worker_died, load_failed) stays readable until the TTL.
      leftBehind: await leftBehindAfterTtl(svc.url, ids, TTL_MS + 5000),
    });
  }, 120_000);

  it('answers "All encoder DP workers are dead." with both killed, then recovers', async () => {
    const pids = (await workers()).workers.map((w) => w.pid!);
    for (const pid of pids) process.kill(pid, 'SIGKILL');
    expect(await waitFor(async () => (await workers()).alive === 0)).toBe(true);
    const r = await encode(nextId('dead'));
    expect(r.err).toMatchObject({ code: 503, message: 'All encoder DP workers are dead.' });
    const ready = await fetch(`${svc.url}/health/ready`);
    expect([200, 503]).toContain(ready.status); // a respawn may already be up
    expect(await bothAlive()).toBe(true);
    const ok = nextId('recovered');
    expect((await encode(ok)).response).toMatchObject({ req_id: ok });
    const health = (await (await fetch(`${svc.url}/health/ready`)).json()) as {
      details: { encoder: { dp_alive: number; dp_total: number } };
    };
    expect(health.details.encoder).toMatchObject({ dp_alive: 2, dp_total: 2 });
  });
});

describe('DP workers without NATS, and with an admin token (e2e)', () => {
  it('encodes over HTTP while NATS is down, as one process does', async () => {
    const svc = await startServiceProcess(
      { EPD_NATS_URL: `nats://127.0.0.1:${await freePort()}`, EPD_DP_SIZE: '2' },
      '/health',
    );
    try {
      const health = (await (await fetch(`${svc.url}/health`)).json()) as {
        details: { nats: { status: string }; encoder: { dp_alive: number } };
      };
      expect(health.details.nats.status).toBe('down');
      expect((await fetch(`${svc.url}/health/ready`)).status).toBe(503);
      const item = dataUri(await image(64, 48, 'png', { r: 9, g: 9, b: 9 }), 'image/png');
      const post = (path: string, body: object) =>
        fetch(`${svc.url}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
      expect(
        await waitFor(
          async () => (await post('/encode', encodeBody('nonats', [item]))).status === 200,
          20_000,
          200,
        ),
      ).toBe(true);
      const meta = await post('/scheduler_receive_meta_data', { req_id: 'nonats' });
      expect(meta.status).toBe(200);
      expect(await meta.json()).toMatchObject({ req_id: 'nonats', embedding_dim: 1024 });
    } finally {
      await svc.stop();
    }
  }, 60_000);

  it('passes the admin token on to the workers for the profile broadcast', async () => {
    const svc = await startServiceProcess({
      EPD_NATS_URL: sharedNatsUrl(),
      EPD_SUBJECT_PREFIX: uniquePrefix(),
      EPD_DP_SIZE: '2',
      EPD_ADMIN_TOKEN: 'sesame-0123456789abcdef0123456789abcdef',
    });
    try {
      const auth = { authorization: 'Bearer sesame-0123456789abcdef0123456789abcdef' };
      expect(await allAlive(svc.url, auth)).toBe(true);
      expect((await fetch(`${svc.url}/start_profile`)).status).toBe(401);
      const start = await fetch(`${svc.url}/start_profile`, { headers: auth });
      expect(start.status).toBe(200);
      expect(await start.text()).toMatch(
        /^dp_rank=0: Start profiling.*\ndp_rank=1: Start profiling/,
      );
      const stop = await fetch(`${svc.url}/stop_profile`, { headers: auth });
      expect(stop.status).toBe(200);
    } finally {
      await svc.stop();
    }
  }, 60_000);
});

describe('DP workers: shutdown (e2e)', () => {
  it('SIGTERM to the supervisor stops every worker within the grace period, leaving no orphan', async () => {
    const svc = await startServiceProcess({
      EPD_NATS_URL: sharedNatsUrl(),
      EPD_SUBJECT_PREFIX: uniquePrefix(),
      EPD_DP_SIZE: '2',
      EPD_LOG_LEVEL: 'info',
    });
    expect(await allAlive(svc.url)).toBe(true);
    // What each worker runs with is logged at start-up.
    expect(svc.output()).toMatch(
      /starting 2 DP workers on \d+ cores: \d+ ONNX Runtime intra-op and 1 preprocessing thread/,
    );
    const w = (await (await fetch(`${svc.url}/admin/workers`)).json()) as Workers;
    const pids = w.workers.map((x) => x.pid!);
    const started = Date.now();
    await svc.stop();
    expect(Date.now() - started).toBeLessThan(4500); // shutdown.graceMs (4000) + exit
    expect(svc.proc.exitCode ?? svc.proc.signalCode).not.toBeNull();
    for (const pid of pids) expect(await waitFor(() => !alive(pid), 2000)).toBe(true);
  }, 60_000);
});

describe('DP workers as owners across instances (e2e, JetStream store)', () => {
  it('a peer instance reaches the owning rank through its supervisor, and learns when it is gone', async () => {
    const env = {
      EPD_NATS_URL: sharedNatsUrl(),
      EPD_REGISTRY_STORE: 'jetstream',
      EPD_KV_BUCKET: freshBucket('dp'),
      EPD_SUBJECT_PREFIX: uniquePrefix(),
      EPD_INSTANCE_HEARTBEAT_MS: '500',
    };
    const svc = await startServiceProcess({ ...env, EPD_DP_SIZE: '2', EPD_INSTANCE_ID: 'dpsup' });
    let peer: TestApp | undefined;
    const got: { reqId: string; bytes: number }[] = [];
    const rx = await ReferenceReceiver.start({
      onFrame: ({ header, data }) => void got.push({ reqId: header.req_id, bytes: data.length }),
    });
    try {
      peer = await startTestApp({ ...env, EPD_INSTANCE_ID: 'peer' });
      const workersOf = async () =>
        (await (await fetch(`${svc.url}/admin/workers`)).json()) as Workers;
      expect(await allAlive(svc.url)).toBe(true);
      const item = dataUri(await image(112, 84, 'png', { r: 1, g: 2, b: 3 }), 'image/png');
      const id = `x-${Date.now()}`;
      const enc = await fetch(`${svc.url}/encode`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(encodeBody(id, [item])),
      });
      expect(enc.status).toBe(200);
      const { embedding_size: size } = (await enc.json()) as { embedding_size: number };

      // The peer sees the record, naming the supervisor's instance, the rank and its pid.
      const record = await peer.registry.wait(id, { timeoutMs: 5000 });
      expect(record.owner).toMatchObject({ instance: 'dpsup', rank: expect.any(Number) });
      const rank = record.owner!.rank!;
      expect(record.owner!.pid).toBe((await workersOf()).workers[rank]!.pid);

      // send over the peer's HTTP: forwarded to dpsup, which hands it to the rank.
      const post = (path: string, body: object) =>
        fetch(`${peer!.httpUrl}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
      const sent = await post('/send', {
        req_id: id,
        prefill_host: '127.0.0.1',
        embedding_port: rx.port,
      });
      expect(sent.status).toBe(200);
      expect(got).toEqual([{ reqId: id, bytes: size }]);

      // The owning worker dies: the peer's next call for it is told so at once.
      process.kill(record.owner!.pid!, 'SIGKILL');
      expect(await waitFor(async () => (await workersOf()).workers[rank]!.restarts === 1)).toBe(
        true,
      );
      // Its waiters learn it too, on the peer: the supervisor published why.
      expect(
        await waitFor(async () => {
          const w = await post('/scheduler_receive_meta_data', { req_id: id, timeout_ms: 500 });
          const body = (await w.json()) as { message?: string };
          return /was lost \(encoder restarted: DP worker rank=\d+ \(pid \d+\) died/.test(
            body.message ?? '',
          );
        }),
      ).toBe(true);
      const again = await post('/send', {
        req_id: id,
        prefill_host: '127.0.0.1',
        embedding_port: rx.port,
      });
      expect(again.status).toBe(503);
      expect((await again.json()) as { type: string; message: string }).toMatchObject({
        type: 'embedding_lost',
        message: expect.stringMatching(
          new RegExp(`was lost \\(encoder restarted: DP worker rank=${rank} .*is gone`),
        ),
      });
    } finally {
      await rx.close();
      await peer?.close();
      await svc.stop();
    }
  }, 90_000);
});
