import { pause } from './support/wait';
import { spawn, type ChildProcess } from 'node:child_process';
import fc from 'fast-check';
import { TimeoutError } from 'rxjs';
import { MMError } from '../src/common/errors/mm-error';
import { NatsServer } from './support/nats-server';
import { freshBucket, kvRegistry, type KvRegistry } from './support/kv-registry';
import { META } from './support/registry-contract';
import { encodeBody, waitFor } from './support/calls';
import { sharedNatsUrl, startTestApp, uniquePrefix } from './support/app';
import { MAIN, startServiceProcess } from './support/service-process';
import { dataUri, image } from './support/media';
import { RequestLifecycle } from '../src/requests/request-lifecycle.service';
import { connect } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';

/**
 * What only a shared store can do: two processes (or two instances) on one bucket see each
 * other's metadata, the metadata outlives a restart, and NATS going away and coming back
 * costs fast 503s, never a hang or a missed put.
 */
describe('shared metadata across registries (e2e, JetStream KV)', () => {
  let a: KvRegistry;
  let b: KvRegistry;

  beforeEach(async () => {
    const bucket = freshBucket('shared');
    a = await kvRegistry(sharedNatsUrl(), { EPD_KV_BUCKET: bucket });
    b = await kvRegistry(sharedNatsUrl(), { EPD_KV_BUCKET: bucket });
  });
  afterEach(async () => {
    await b.close({ destroy: false });
    await a.close();
  });

  it('a waiter on B wakes when A publishes; a publish on A answers a later wait on B at once', async () => {
    const waiting = b.registry.wait('x', { timeoutMs: 3000 });
    await waitFor(async () => (await b.registry.stats()).waiters === 1);
    await a.registry.publish('x', META, 0, { instance: 'A' });
    await expect(waiting).resolves.toMatchObject({
      reqId: 'x',
      metadata: META,
      owner: { instance: 'A' },
    });
    await a.registry.publish('y', { error: 'bad image' });
    await expect(b.registry.wait('y', { timeoutMs: 500 })).rejects.toMatchObject({
      code: 500,
      message: 'bad image',
    });
    expect(await b.registry.stats()).toMatchObject({ waiters: 0, waitedReqIds: 0, entries: 2 });
  });

  it("B answers published metadata from its watcher's mirror, and forgets it when A discards it", async () => {
    await a.registry.publish('m', META);
    expect(await waitFor(() => b.store.cached.mirror === 1, 2000)).toBe(true);
    await expect(b.registry.wait('m', { timeoutMs: 500 })).resolves.toMatchObject({
      metadata: META,
    });
    expect(await a.registry.discard('m')).toBe(true);
    expect(await waitFor(() => b.store.cached.mirror === 0, 2000)).toBe(true);
    expect(await b.registry.has('m')).toBe(false);
    expect(await b.registry.wait('m', { timeoutMs: 200 }).catch((e: unknown) => e)).toBeInstanceOf(
      TimeoutError,
    );
    // A fresh publish is seen again: the late echo of the discarded put was not.
    await a.registry.publish('m', { ...META, embedding_len: 7 });
    await expect(b.registry.wait('m', { timeoutMs: 1000 })).resolves.toMatchObject({
      metadata: { embedding_len: 7 },
    });
  });

  it('one watcher per process: 1000 waiters on B over 500 ids are woken by their own puts only', async () => {
    const waits = Array.from({ length: 1000 }, (_, i) =>
      b.registry.wait(`id-${i % 500}`, { timeoutMs: 10_000 }),
    );
    await waitFor(async () => (await b.registry.stats()).waiters === 1000);
    expect(await b.registry.stats()).toMatchObject({ waiters: 1000, waitedReqIds: 500 });
    for (let i = 0; i < 250; i++) await a.registry.publish(`id-${i}`, META);
    expect(await waitFor(async () => (await b.registry.stats()).waiters === 500, 5000)).toBe(true);
    expect((await b.registry.stats()).waitedReqIds).toBe(250);
    for (let i = 250; i < 500; i++) await a.registry.publish(`id-${i}`, META);
    const got = await Promise.all(waits);
    expect(got.map((r) => r.reqId)).toEqual(waits.map((_, i) => `id-${i % 500}`));
  });
});

describe('NATS down and back (e2e, own nats-server)', () => {
  let server: NatsServer;
  beforeAll(async () => {
    server = await NatsServer.start();
  });
  afterAll(() => server.dispose());

  it('fails fast with 503 naming the store, and resumes the watcher without missing a put', async () => {
    const bucket = freshBucket('outage');
    const a = await kvRegistry(server.url, { EPD_KV_BUCKET: bucket });
    try {
      const waiting = a.registry.wait('later', { timeoutMs: 20_000 });
      await server.stop();
      await waitFor(() => a.nats.state !== 'connected', 5000);

      const started = Date.now();
      await expect(a.registry.publish('p', META)).rejects.toMatchObject({
        code: 503,
        type: 'store_unavailable',
        message: expect.stringContaining('metadata store jetstream unavailable') as string,
      });
      await expect(a.registry.wait('p', { timeoutMs: 10_000 })).rejects.toMatchObject({
        code: 503,
      });
      expect(Date.now() - started).toBeLessThan(1000); // fast: nowhere near the 10 s deadline

      // NATS returns (same store dir); another process publishes while A's watcher is
      // still reconnecting: A's waiter must get it.
      await server.restart();
      const b = await kvRegistry(server.url, { EPD_KV_BUCKET: bucket });
      await b.registry.publish('later', META);
      await expect(waiting).resolves.toMatchObject({ reqId: 'later', metadata: META });
      expect(await waitFor(() => a.nats.state === 'connected', 10_000)).toBe(true);
      await expect(a.registry.wait('later', { timeoutMs: 2000 })).resolves.toMatchObject({
        metadata: META,
      });
      await b.close({ destroy: false });
    } finally {
      await a.close();
    }
  });
});

describe('the app with the JetStream store while NATS is down (e2e, own nats-server)', () => {
  it('readiness names the store, encode-side publishes fail fast with 503, and /metrics keeps answering', async () => {
    const server = await NatsServer.start();
    const t = await startTestApp({
      EPD_NATS_URL: server.url,
      EPD_REGISTRY_STORE: 'jetstream',
      EPD_KV_BUCKET: freshBucket('down'),
    });
    try {
      expect((await fetch(`${t.httpUrl}/metrics`)).status).toBe(200);
      await server.stop();
      await waitFor(async () => (await fetch(`${t.httpUrl}/health/ready`)).status === 503, 5000);
      const ready = (await (await fetch(`${t.httpUrl}/health/ready`)).json()) as {
        details: { registry: { status: string; store: string; error: string } };
      };
      expect(ready.details.registry).toMatchObject({ status: 'down', store: 'jetstream' });
      expect(ready.details.registry.error).toContain('metadata store jetstream unavailable');
      const metrics = await fetch(`${t.httpUrl}/metrics`);
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toContain('epd_encoder_registry_waiters');
      await expect(t.registry.publish('x', META)).rejects.toMatchObject({ code: 503 });
    } finally {
      await t.close();
      await server.dispose();
    }
  });
});

describe('one instance on the JetStream store answers as on the memory store (e2e)', () => {
  it('send after release is refused at once, not after waiting for an encode', async () => {
    const t = await startTestApp({
      EPD_REGISTRY_STORE: 'jetstream',
      EPD_KV_BUCKET: freshBucket('late'),
    });
    const post = (path: string, body: unknown) =>
      fetch(`${t.httpUrl}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    try {
      const png = await image(56, 56);
      const enc = await post('/encode', encodeBody('late', [dataUri(png, 'image/png')]));
      expect(enc.status).toBe(200);
      await t.registry.publish('other', META); // unrelated traffic in the bucket
      await t.app.get(RequestLifecycle).release('late');
      const started = Date.now();
      const res = await post('/send', {
        req_id: 'late',
        prefill_host: '127.0.0.1',
        embedding_port: 9,
        timeout_ms: 30_000,
      });
      expect(Date.now() - started).toBeLessThan(3000);
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(((await res.json()) as { message: string }).message).toContain('released');
    } finally {
      await t.close();
    }
  });
});

describe('a bucket that exists with other settings (e2e, the built service)', () => {
  it('refuses to start (exit 78) with a message naming the settings and what to do', async () => {
    const bucket = freshBucket('conflict');
    const other = await kvRegistry(sharedNatsUrl(), {
      EPD_KV_BUCKET: bucket,
      EPD_SEND_TIMEOUT_MS: '60000',
    });
    try {
      const proc = spawn(process.execPath, [MAIN], {
        env: {
          ...process.env,
          EPD_NATS_URL: sharedNatsUrl(),
          EPD_HTTP_PORT: '0',
          EPD_SUBJECT_PREFIX: `conflict${process.pid}`,
          EPD_REGISTRY_STORE: 'jetstream',
          EPD_KV_BUCKET: bucket,
          EPD_LOG_LEVEL: 'error',
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      proc.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
      const code = await new Promise<number | null>((r) => proc.once('exit', r));
      expect(code).toBe(78);
      expect(stderr).toContain(
        `epd-encoder: KV bucket ${bucket} exists with other settings (ttlMs 60000, want 180000)`,
      );
      expect(stderr).toContain('delete the bucket or use another EPD_KV_BUCKET');
    } finally {
      await other.close();
    }
  });
});

describe('two instances creating the bucket at once (e2e)', () => {
  it('concurrent-bucket-create: a bucket its creator has not capped yet is capped, not refused', async () => {
    // The creator's state between its two steps (KV create, then max_msgs on the stream):
    // CI saw the second instance refuse to start on it (exit 78, "maxEntries -1").
    const bucket = freshBucket('race');
    const nc = await connect({ servers: sharedNatsUrl() });
    try {
      await new Kvm(jetstream(nc)).create(bucket, { history: 1, ttl: 180_000, replicas: 1 });
      const second = await kvRegistry(sharedNatsUrl(), { EPD_KV_BUCKET: bucket });
      try {
        const info = await (await jetstreamManager(nc)).streams.info(`KV_${bucket}`);
        expect(info.config.max_msgs).toBe(second.config.registry.maxEntries);
      } finally {
        await second.close({ destroy: true });
      }
    } finally {
      await nc.close();
    }
  });
});

describe('metadata survives a restart (e2e, the app with the JetStream store)', () => {
  it('publish, restart the service, then wait: the metadata is still there', async () => {
    const env = { EPD_REGISTRY_STORE: 'jetstream', EPD_KV_BUCKET: freshBucket('restart') };
    const first = await startTestApp(env);
    await first.registry.publish('kept', META, 0);
    await first.close();
    const second = await startTestApp(env);
    try {
      await expect(second.registry.wait('kept', { timeoutMs: 2000 })).resolves.toMatchObject({
        reqId: 'kept',
        metadata: META,
        partIdx: 0,
      });
    } finally {
      await second.close();
    }
  });
});

describe('crash honesty (e2e, JetStream store, the same EPD_INSTANCE_ID after a crash)', () => {
  it('a call for an embedding the crashed process staged says it was lost, not "already released"', async () => {
    const env = {
      EPD_NATS_URL: sharedNatsUrl(),
      EPD_REGISTRY_STORE: 'jetstream',
      EPD_KV_BUCKET: freshBucket('crash'),
      EPD_SUBJECT_PREFIX: uniquePrefix(),
      EPD_INSTANCE_ID: 'same-id',
    };
    const post = (url: string, path: string, body: object) =>
      fetch(`${url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const first = await startServiceProcess(env);
    const item = dataUri(await image(64, 48, 'png', { r: 5, g: 6, b: 7 }), 'image/png');
    expect((await post(first.url, '/encode', encodeBody('staged-then-crash', [item]))).status).toBe(
      200,
    );
    const exited = new Promise((r) => first.proc.once('exit', r));
    first.proc.kill('SIGKILL');
    await exited;

    const second = await startServiceProcess(env);
    try {
      const r = await post(second.url, '/send', {
        req_id: 'staged-then-crash',
        prefill_host: '127.0.0.1',
        embedding_port: 9,
      });
      expect(r.status).toBe(503);
      expect(await r.json()).toMatchObject({
        type: 'embedding_lost',
        message: 'staged embedding for req_id=staged-then-crash was lost (encoder restarted)',
      });
      // A receiver that waits for its metadata now is told the same, not handed a size.
      const w = await post(second.url, '/scheduler_receive_meta_data', {
        req_id: 'staged-then-crash',
        timeout_ms: 2000,
      });
      expect(w.status).toBe(503);
      expect(await w.json()).toMatchObject({ type: 'embedding_lost' });
      // A req_id encoded by the new process is its own, as before.
      expect((await post(second.url, '/encode', encodeBody('after-restart', [item]))).status).toBe(
        200,
      );
      const status = await fetch(`${second.url}/admin/requests/after-restart`);
      expect(status.status).toBe(200);
    } finally {
      await second.stop();
    }
  }, 60_000);
});

/**
 * The registry property across two processes: this one and a peer (a child process on
 * the built code) share a bucket. Random publishes, waits, discards and pauses, issued to
 * either side, in real time.
 */
const PEER = `
const { loadConfig } = require('./dist/config/config.loader');
const { makeKvRegistry } = require('./dist/meta-registry/testing');
require('@nestjs/common').Logger.overrideLogger(['error']);
(async () => {
  const { config } = loadConfig({ ...process.env, EPD_LOG_LEVEL: 'error' });
  const { registry, store, nats } = await makeKvRegistry(config);
  const outcome = (p) => p.then(
    (r) => ({ kind: 'value', len: r.metadata.embedding_len }),
    (e) => e && e.name === 'TimeoutError' ? { kind: 'timeout' } : { kind: 'error', message: e.message },
  );
  process.on('message', async (m) => {
    let reply;
    try {
      if (m.op === 'publish') reply = await registry.publish(m.id, m.meta);
      else if (m.op === 'wait') {
        // Acknowledged once the waiter is registered; the outcome follows as its own message.
        const settled = outcome(registry.wait(m.id, { timeoutMs: m.timeout }));
        settled.then((o) => process.send({ outcomeOf: m.seq, outcome: o }));
      }
      else if (m.op === 'discard') reply = await registry.discard(m.id);
      else if (m.op === 'stats') reply = await registry.stats();
      else if (m.op === 'stop') { registry.close(); store.onApplicationShutdown(); await nats.onApplicationShutdown(); process.exit(0); }
      process.send({ seq: m.seq, ok: true, reply });
    } catch (e) {
      process.send({ seq: m.seq, ok: false, error: e.message });
    }
  });
  process.send({ ready: true });
})();
`;

class Peer {
  private seq = 0;
  private readonly pending = new Map<
    number,
    (m: { ok: boolean; reply?: unknown; error?: string }) => void
  >();
  private readonly outcomes = new Map<number, (o: Outcome) => void>();
  private constructor(private readonly proc: ChildProcess) {
    proc.on(
      'message',
      (m: { seq: number; ok: boolean; reply?: unknown; error?: string } | WaitOutcome) => {
        if ('outcomeOf' in m) {
          this.outcomes.get(m.outcomeOf)?.(m.outcome);
          this.outcomes.delete(m.outcomeOf);
          return;
        }
        this.pending.get(m.seq)?.(m);
        this.pending.delete(m.seq);
      },
    );
  }

  /** Resolves once the peer's waiter is registered; `outcome` settles with the wait. */
  async wait(id: string, timeout: number): Promise<{ outcome: Promise<Outcome> }> {
    const seq = this.seq + 1;
    const outcome = new Promise<Outcome>((resolve) => this.outcomes.set(seq, resolve));
    await this.call('wait', { id, timeout });
    return { outcome };
  }

  static async start(env: Record<string, string>): Promise<Peer> {
    const proc = spawn(process.execPath, ['-e', PEER], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    await new Promise<void>((resolve, reject) => {
      proc.once('message', () => resolve());
      proc.once('exit', (code) => reject(new Error(`peer exited with ${code}`)));
    });
    return new Peer(proc);
  }

  call<T>(op: string, args: Record<string, unknown> = {}): Promise<T> {
    const seq = ++this.seq;
    return new Promise((resolve, reject) => {
      this.pending.set(seq, (m) =>
        m.ok ? resolve(m.reply as T) : reject(new Error(`peer ${op}: ${m.error}`)),
      );
      this.proc.send({ seq, op, ...args });
    });
  }

  async stop(): Promise<void> {
    const exited = new Promise((r) => this.proc.once('exit', r));
    this.proc.send({ op: 'stop', seq: 0 });
    await exited;
  }
}

type Outcome =
  { kind: 'value'; len: number } | { kind: 'error'; message: string } | { kind: 'timeout' };
interface WaitOutcome {
  outcomeOf: number;
  outcome: Outcome;
}
type Side = 'here' | 'peer';
type Cmd =
  | { t: 'publish'; side: Side; id: string; error: boolean }
  | { t: 'wait'; side: Side; id: string; long: boolean }
  | { t: 'discard'; side: Side; id: string }
  | { t: 'pause'; ms: number };

const side = fc.constantFrom<Side>('here', 'peer');
const id = fc.constantFrom('a', 'b', 'c');
const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  fc.record({ t: fc.constant('publish' as const), side, id, error: fc.boolean() }),
  fc.record({ t: fc.constant('wait' as const), side, id, long: fc.boolean() }),
  fc.record({ t: fc.constant('discard' as const), side, id }),
  fc.record({ t: fc.constant('pause' as const), ms: fc.integer({ min: 0, max: 80 }) }),
);

describe('registry property across two processes (e2e, JetStream KV)', () => {
  it('no lost answer, no double answer, no phantom value, nothing left behind', async () => {
    const SHORT = 150;
    const LONG = 2500;
    await fc.assert(
      fc.asyncProperty(fc.array(cmd, { minLength: 5, maxLength: 25 }), async (cmds) => {
        const bucket = freshBucket('prop');
        const here = await kvRegistry(sharedNatsUrl(), { EPD_KV_BUCKET: bucket });
        const peer = await Peer.start({
          EPD_NATS_URL: sharedNatsUrl(),
          EPD_REGISTRY_STORE: 'jetstream',
          EPD_KV_BUCKET: bucket,
        });
        try {
          // What was published per id (len → error?), and when each publish completed.
          const published = new Map<string, { len: number; done: number; error: boolean }[]>();
          const discarded = new Map<string, number[]>();
          const waits: {
            id: string;
            start: number;
            deadline: number;
            outcomes: Outcome[];
            settled: Promise<void>;
          }[] = [];
          let len = 0;
          const here$ = (p: Promise<unknown>): Promise<Outcome> =>
            p.then(
              (r) => ({
                kind: 'value' as const,
                len: (r as { metadata: { embedding_len: number } }).metadata.embedding_len,
              }),
              (e: unknown) =>
                e instanceof TimeoutError
                  ? { kind: 'timeout' as const }
                  : { kind: 'error' as const, message: (e as MMError).message },
            );
          for (const c of cmds) {
            if (c.t === 'pause') {
              await pause(c.ms, 'a pause the generated schedule asks for');
            } else if (c.t === 'publish') {
              const n = ++len;
              const meta = c.error
                ? { error: `boom-${n}` }
                : { embedding_len: n, embedding_dim: 8, embedding_size: n * 32 };
              if (c.side === 'here') await here.registry.publish(c.id, meta);
              else await peer.call('publish', { id: c.id, meta });
              const list = published.get(c.id) ?? [];
              list.push({ len: n, done: Date.now(), error: c.error });
              published.set(c.id, list);
            } else if (c.t === 'discard') {
              const at = Date.now();
              if (c.side === 'here') await here.registry.discard(c.id);
              else await peer.call('discard', { id: c.id });
              discarded.set(c.id, [...(discarded.get(c.id) ?? []), at]);
            } else {
              const timeout = c.long ? LONG : SHORT;
              const start = Date.now();
              const w = {
                id: c.id,
                start,
                deadline: start + timeout,
                outcomes: [] as Outcome[],
                settled: Promise.resolve(),
              };
              // Both sides: the waiter is registered before the next command runs.
              const p =
                c.side === 'here'
                  ? here$(here.registry.wait(c.id, { timeoutMs: timeout }))
                  : (await peer.wait(c.id, timeout)).outcome;
              w.settled = p.then((o) => void w.outcomes.push(o));
              waits.push(w);
            }
          }
          await Promise.all(waits.map((w) => w.settled));

          for (const w of waits) {
            // Exactly one answer.
            expect(w.outcomes).toHaveLength(1);
            const o = w.outcomes[0]!;
            const pubs = published.get(w.id) ?? [];
            // No phantom: a value or error is one that was published for this id.
            if (o.kind === 'value') {
              expect(pubs.some((p) => p.len === o.len && !p.error)).toBe(true);
            }
            if (o.kind === 'error') {
              expect(pubs.some((p) => o.message === `boom-${p.len}`)).toBe(true);
            }
            // No lost answer: published (and not discarded since) before the wait began,
            // or published well inside a long wait, is never a timeout.
            const lastDiscard = Math.max(-Infinity, ...(discarded.get(w.id) ?? []));
            const before = pubs.some((p) => p.done < w.start && p.done > lastDiscard);
            const during = pubs.some((p) => p.done >= w.start && p.done < w.deadline - 500);
            if (before || (during && w.deadline - w.start === LONG)) {
              expect(o.kind).not.toBe('timeout');
            }
          }
          // Nothing left behind on either side.
          const mine = await here.registry.stats();
          const theirs = await peer.call<{ waiters: number; waitedReqIds: number }>('stats');
          expect(mine).toMatchObject({ waiters: 0, waitedReqIds: 0 });
          expect(theirs).toMatchObject({ waiters: 0, waitedReqIds: 0 });
          for (const k of ['a', 'b', 'c']) await here.registry.discard(k);
          expect((await here.registry.stats()).entries).toBe(0);
        } finally {
          await peer.stop();
          await here.close();
        }
      }),
      { numRuns: Number(process.env.EPD_SHARED_PROPERTY_RUNS ?? 10), endOnFailure: true },
    );
  });
});
