import { waitFor } from './support/wait';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { ClientProxyFactory, Transport, type ClientProxy } from '@nestjs/microservices';
import { firstValueFrom, timeout } from 'rxjs';
import { natsCall } from './support/calls';
import { sharedNatsUrl, startTestApp, type TestApp } from './support/app';
import { freshBucket } from './support/kv-registry';

const META = { embedding_size: 4096 * 64, embedding_len: 64, embedding_dim: 1024 };

// Every store behaves the same to a caller: the memory store, and the shared JetStream KV.
describe.each(['memory', 'jetstream'])('metadata over NATS (e2e, %s store)', (store) => {
  let t: TestApp;
  let nc: NatsConnection;
  let subject: (dp: string) => string;

  /** A plain NATS request, as a Python/Go client or the `nats` CLI would send it. */
  const call = async (dp: string, data: unknown, timeout = 5000) =>
    (await natsCall(nc, t, dp, data, { timeout })) as Record<string, unknown>;

  beforeAll(async () => {
    t = await startTestApp({ EPD_REGISTRY_STORE: store, EPD_KV_BUCKET: freshBucket('meta') });
    nc = await connect({ servers: sharedNatsUrl() });
    subject = (dp) => `${t.config.nats.subjectPrefix}.v1.${dp}`;
  });

  afterAll(async () => {
    await nc.drain();
    await t.close();
  });

  afterEach(async () => {
    // Nothing may be left behind by any test: no waiter, no per-req_id subject.
    const s = await t.registry.stats();
    expect(s.waiters).toBe(0);
    expect(s.waitedReqIds).toBe(0);
  });

  it('wakes a receiver that waits before the preprocessor publishes', async () => {
    const waiting = call('wait_metadata', { req_id: 'wbp', part_idx: 0 });
    await waitUntil(async () => (await t.registry.stats()).waiters === 1);
    const started = Date.now();
    expect(
      await call('publish_metadata', { req_id: 'wbp', part_idx: 0, metadata: META }),
    ).toMatchObject({ response: null });
    const reply = await waiting;
    expect(Date.now() - started).toBeLessThan(1000);
    expect(reply).toMatchObject({ response: { ...META, req_id: 'wbp', part_idx: 0 } });
    expect(reply.err).toBeUndefined();
  });

  it('answers at once when the metadata was published first', async () => {
    await call('publish_metadata', { req_id: 'pbw', metadata: META, part_idx: 2 });
    expect(await call('has_metadata', { req_id: 'pbw' })).toMatchObject({
      response: { req_id: 'pbw', present: true },
    });
    const reply = await call('wait_metadata', { req_id: 'pbw', timeout_ms: 50 });
    expect(reply.response).toEqual({ ...META, req_id: 'pbw', part_idx: 2 });
  });

  it('answers 504 "encode metadata not ready" when timeout_ms passes, and not before', async () => {
    const started = Date.now();
    const reply = await call('wait_metadata', { req_id: 'late', timeout_ms: 300 });
    const elapsed = Date.now() - started;
    expect(reply.err).toEqual({
      status: 'error',
      code: 504,
      type: 'metadata_not_ready',
      message: 'encode metadata not ready',
      req_id: 'late',
    });
    expect(elapsed).toBeGreaterThanOrEqual(300);
    expect(elapsed).toBeLessThan(3000);
    expect((await t.registry.stats()).counters.timeouts).toBeGreaterThanOrEqual(1);
  });

  it('honours a Deadline header (epoch ms) the same way', async () => {
    const { headers } = await import('@nats-io/transport-node');
    const h = headers();
    h.set('Deadline', String(Date.now() + 200));
    const msg = await nc.request(subject('wait_metadata'), JSON.stringify({ req_id: 'hdr' }), {
      timeout: 5000,
      headers: h,
    });
    expect(msg.json<{ err: unknown }>().err).toMatchObject({
      code: 504,
      message: 'encode metadata not ready',
    });
  });

  it('delivers a published {error} to waiters as a 500 with its text', async () => {
    const waiting = call('wait_metadata', { req_id: 'failed' });
    await waitUntil(async () => (await t.registry.stats()).waiters === 1);
    await call('publish_metadata', {
      req_id: 'failed',
      metadata: { error: 'Error while loading data x: bad png' },
    });
    expect((await waiting).err).toEqual({
      status: 'error',
      code: 500,
      type: 'encode_failed',
      message: 'Error while loading data x: bad png',
      req_id: 'failed',
    });
  });

  it('answers 400 naming the problem for malformed payloads, then keeps serving', async () => {
    const notJson = await call('wait_metadata', '{"req_id": ');
    expect(notJson.err).toMatchObject({
      code: 400,
      message: expect.stringMatching(/^request body is not valid JSON/),
    });

    const noId = await call('wait_metadata', { part_idx: 0 });
    expect(noId.err).toMatchObject({ code: 400, message: expect.stringContaining('req_id') });

    const badMeta = await call('publish_metadata', {
      req_id: 'x',
      metadata: { embedding_len: -1 },
    });
    expect(badMeta.err).toMatchObject({
      code: 400,
      req_id: 'x',
      message: expect.stringContaining('metadata'),
    });

    const badTimeout = await call('wait_metadata', { req_id: 'x', timeout_ms: 'soon' });
    expect(badTimeout.err).toMatchObject({
      code: 400,
      message: expect.stringContaining('timeout_ms'),
    });

    await call('publish_metadata', { req_id: 'still-ok', metadata: META });
    expect((await call('wait_metadata', { req_id: 'still-ok' })).response).toMatchObject(META);
  });

  it('answers 413 to a request over the size limit instead of hanging', async () => {
    const big = JSON.stringify({ req_id: 'big', pad: 'x'.repeat(t.config.nats.maxRequestBytes) });
    const reply = await call('wait_metadata', big);
    expect(reply.err).toMatchObject({
      code: 413,
      message: expect.stringMatching(/exceeds the limit/),
    });
  });

  it('release is idempotent and drops the entry', async () => {
    await call('publish_metadata', { req_id: 'rel', metadata: META });
    expect(await call('release', { req_id: 'rel' })).toMatchObject({ response: null });
    expect(await call('release', { req_id: 'rel' })).toMatchObject({ response: null });
    expect(await call('has_metadata', { req_id: 'rel' })).toMatchObject({
      response: { present: false },
    });
  });

  it('also serves the per-rank subject <prefix>.v1.rank.<N>.<dp_type>', async () => {
    await call('publish_metadata', { req_id: 'ranked', metadata: META });
    const msg = await nc.request(
      `${t.config.nats.subjectPrefix}.v1.rank.0.has_metadata`,
      JSON.stringify({ req_id: 'ranked' }),
      { timeout: 5000 },
    );
    expect(msg.json()).toMatchObject({ response: { present: true } });
  });

  describe('with a Nest ClientProxy caller', () => {
    let client: ClientProxy;
    beforeAll(async () => {
      client = ClientProxyFactory.create({
        transport: Transport.NATS,
        options: { servers: [sharedNatsUrl()] },
      });
      await client.connect();
    });
    afterAll(async () => {
      await client.close();
    });

    it('publishes and waits through Nest envelopes', async () => {
      const waiting = firstValueFrom(
        client
          .send(subject('wait_metadata'), { req_id: 'nest-1', part_idx: 1 })
          .pipe(timeout(5000)),
      );
      await waitUntil(async () => (await t.registry.stats()).waiters === 1);
      await firstValueFrom(
        client.send(subject('publish_metadata'), { req_id: 'nest-1', metadata: META }),
      );
      expect(await waiting).toEqual({ ...META, req_id: 'nest-1', part_idx: 1 });
    });

    it('receives the error body as a plain object', async () => {
      const err = await firstValueFrom(
        client.send(subject('wait_metadata'), { req_id: 'nest-2', timeout_ms: 100 }),
      ).catch((e: unknown) => e);
      expect(err).toMatchObject({
        status: 'error',
        code: 504,
        message: 'encode metadata not ready',
        req_id: 'nest-2',
      });
    });
  });
});

const waitUntil = (cond: () => Promise<boolean>) => waitFor(cond, 5000, 5);
