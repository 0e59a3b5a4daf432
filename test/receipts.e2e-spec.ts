import {
  connect,
  createInbox,
  headers,
  type Msg,
  type NatsConnection,
  type Subscription,
} from '@nats-io/transport-node';
import { EncoderClient } from '../src/client';
import { EpdNatsServer } from '../src/transport/epd-nats.server';
import { receiptCallsInFlight } from '../src/transport/receipts';
import { sharedNatsUrl, startTestApp, uniquePrefix, type TestApp } from './support/app';
import { startServiceProcess, stopProcess } from './support/service-process';
import { waitFor } from './support/wait';

const META = { embedding_size: 4096 * 64, embedding_len: 64, embedding_dim: 1024 };

/**
 * The receipt protocol against the running app (src/transport/receipts.ts): a call is run
 * once however often it is sent, and an answer lost in transit is given again. The fault
 * bench saw both at node losses: a forwarded `send` whose answer died in the owner's
 * node answered 504 at its deadline (bench/results/failover.md, run 3), and a resend whose
 * receipt was lost must not run the call twice.
 */
describe('receipts and repeated calls (e2e, NATS)', () => {
  let t: TestApp;
  let nc: NatsConnection;
  let server: EpdNatsServer;
  const subject = (dp: string) => `${t.config.nats.subjectPrefix}.v1.${dp}`;

  beforeAll(async () => {
    t = await startTestApp({ EPD_REGISTRY_STORE: 'memory' });
    nc = await connect({ servers: sharedNatsUrl() });
    server = t.app.get(EpdNatsServer);
  });

  afterAll(async () => {
    await nc.drain();
    await t.close();
  });

  /** A raw caller of the protocol: one inbox, one call id, every message it receives. */
  function caller(callId: string, deadlineMs: number) {
    const inbox = createInbox();
    const got: Msg[] = [];
    let sub: Subscription | undefined;
    const listen = () => (sub = nc.subscribe(inbox, { callback: (_e, m) => void got.push(m) }));
    const send = (to: string, body: object) => {
      const h = headers();
      h.set('Epd-Receipt', '1');
      h.set('Epd-Call', callId);
      h.set('Deadline', String(Date.now() + deadlineMs));
      nc.publish(to, JSON.stringify(body), { reply: inbox, headers: h });
    };
    const answers = () => got.filter((m) => m.data.length > 0).map((m) => m.json());
    const receipts = () => got.filter((m) => m.headers?.get('Epd-Receipt') === 'received');
    listen();
    return { got, send, answers, receipts, listen, stop: () => sub?.unsubscribe() };
  }

  it('an answer lost in transit is given again to a probe with the same call id, without running the call again', async () => {
    const c = caller('lost-answer-1', 3_000);
    c.send(subject('wait_metadata'), { req_id: 'la', timeout_ms: 3_000 });
    await waitFor(() => c.receipts().length === 1);
    // The receipt names this instance's probe subject in the caller's space (the shared
    // one here), where the probe goes.
    const probe = c.receipts()[0]!.headers!.get('Epd-Probe');
    expect(probe).toBe(
      `${t.config.nats.subjectPrefix}.v1.probe.${t.config.instance.id}.wait_metadata`,
    );
    await waitFor(async () => (await t.registry.stats()).waiters === 1);
    // The answer is published while nobody listens on the inbox: NATS drops it, as a
    // dying node does.
    c.stop();
    await nc.flush();
    const before = server.calls.stats;
    await t.registry.publish('la', META, 0);
    await waitFor(() => server.calls.stats.answered === before.answered + 1);
    await waitFor(async () => (await t.registry.stats()).waiters === 0);
    await nc.flush();
    expect(c.answers()).toHaveLength(0); // lost
    c.listen();
    await nc.flush();
    c.send(probe, { req_id: 'la', timeout_ms: 3_000 });
    await waitFor(() => c.answers().length === 1);
    expect(c.answers()[0]).toMatchObject({ response: { ...META, req_id: 'la' } });
    expect(server.calls.stats.replayed).toBe(before.replayed + 1);
    // Replayed from the ledger: no second wait was registered.
    expect((await t.registry.stats()).waiters).toBe(0);
    c.stop();
  });

  it('a second send of a call still running joins it: a receipt, and one answer', async () => {
    const c = caller('joined-1', 3_000);
    const body = { req_id: 'jn', timeout_ms: 3_000 };
    c.send(subject('wait_metadata'), body);
    await waitFor(() => c.receipts().length === 1);
    const before = server.calls.stats;
    c.send(c.receipts()[0]!.headers!.get('Epd-Probe'), body);
    await waitFor(() => c.receipts().length === 2);
    expect(server.calls.stats.joined).toBe(before.joined + 1);
    expect((await t.registry.stats()).waiters).toBe(1);
    await t.registry.publish('jn', META, 0);
    await waitFor(() => c.answers().length === 1);
    await nc.flush();
    expect(c.answers()).toHaveLength(1);
    c.stop();
  });

  it('a probe subject only looks calls up: one it does not know gets no answer and never runs', async () => {
    // Probe subjects are in every caller's permissions; were a call run there, a receiver
    // could make the encoder run what its role may not call (an encode).
    const c = caller('never-sent-1', 3_000);
    const before = server.calls.stats;
    const probeSubject = `${t.config.nats.subjectPrefix}.v1.probe.${t.config.instance.id}`;
    c.send(`${probeSubject}.wait_metadata`, { req_id: 'pr', timeout_ms: 3_000 });
    // The server answers a probe (if at all) before it counts it, in the same turn.
    await waitFor(() => server.calls.stats.unknown === before.unknown + 1);
    await nc.flush();
    expect(c.got).toHaveLength(0);
    expect((await t.registry.stats()).waiters).toBe(0);
    expect(server.calls.stats.tracked).toBe(before.tracked);
    c.stop();
  });

  it('the client library asks for receipts: its calls are answered, and a call nobody takes fails in about a second, not at its deadline', async () => {
    const client = await EncoderClient.connect({
      connection: nc,
      subjectPrefix: t.config.nats.subjectPrefix,
      requestTimeoutMs: 3_000,
    });
    await t.registry.publish('cl', META, 0);
    expect(await client.hasMetadata('cl')).toBe(true);
    expect(await client.waitMetadata('cl', { timeoutMs: 2000 })).toMatchObject({ req_id: 'cl' });

    // A subscriber that takes every call and never answers nor acknowledges it: what a
    // call lost in transit looks like to the caller.
    const blackHole = `bh${Date.now()}`;
    const sub = nc.subscribe(`${blackHole}.v1.>`, { callback: () => undefined });
    await nc.flush();
    const lost = await EncoderClient.connect({
      connection: nc,
      subjectPrefix: blackHole,
      requestTimeoutMs: 30_000,
    });
    const started = Date.now();
    await expect(lost.hasMetadata('x')).rejects.toMatchObject({
      code: 503,
      type: 'unacknowledged',
    });
    const took = Date.now() - started;
    expect(took).toBeLessThan(5_000); // 3 sends 300 ms apart; the deadline was 30 s
    sub.unsubscribe();
    expect(receiptCallsInFlight(nc)).toBe(0);
  });

  it('every tracked call drains away after its deadline (the ledger is bounded in time)', async () => {
    // The calls above had deadlines of at most 3 s; each is kept 5 s
    // past it. Their ledger entries must all go.
    await waitFor(() => server.calls.stats.tracked === 0, 30_000, 200);
  }, 60_000);
});

/**
 * A stopping instance leaves its queue groups before it refuses anything: new calls on
 * the shared subjects go to the other instance. The start-up bench counted 318 answers of
 * 503 `shutting_down` over 50 stops before this (bench/results/startup.md).
 */
describe('an instance that stops (e2e, two service processes in one queue group)', () => {
  it('gives no new call a 503 shutting_down: it leaves the queue group first', async () => {
    const prefix = uniquePrefix();
    const env = (id: string) => ({
      EPD_NATS_URL: sharedNatsUrl(),
      EPD_SUBJECT_PREFIX: prefix,
      EPD_INSTANCE_ID: id,
      EPD_REGISTRY_STORE: 'memory',
    });
    const [a, b] = await Promise.all([
      startServiceProcess(env('stay')),
      startServiceProcess(env('stop')),
    ]);
    const nc = await connect({ servers: sharedNatsUrl() });
    try {
      // Published on both (memory stores): every wait is answered at once, wherever it lands.
      for (const id of ['stay', 'stop']) {
        const msg = await nc.request(
          `${prefix}.v1.inst.${id}.publish_metadata`,
          JSON.stringify({ req_id: 'sd', part_idx: 0, metadata: META }),
          { timeout: 5000 },
        );
        expect(msg.json()).toMatchObject({ response: null });
      }
      const outcomes = new Map<string, number>();
      let stop = false;
      const loop = async () => {
        while (!stop) {
          const msg = await nc.request(
            `${prefix}.v1.wait_metadata`,
            JSON.stringify({ req_id: 'sd', timeout_ms: 2000 }),
            { timeout: 5000 },
          );
          const reply = msg.json<{ err?: { code: number; message: string } }>();
          const key = reply.err ? `${reply.err.code} ${reply.err.message}` : 'ok';
          outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
        }
      };
      const loops = Array.from({ length: 8 }, loop);
      await waitFor(() => (outcomes.get('ok') ?? 0) >= 400);
      const beforeStop = outcomes.get('ok')!;
      await stopProcess(b.proc); // SIGTERM, by its PID
      await waitFor(() => outcomes.get('ok')! >= beforeStop + 400);
      stop = true;
      await Promise.all(loops);
      expect(Object.fromEntries(outcomes)).toEqual({ ok: expect.any(Number) });
    } finally {
      await nc.drain();
      await Promise.all([a.stop(), b.stop()]);
    }
  }, 90_000);
});
