import request from 'supertest';
import { waitFor } from './support/wait';
import { startTestApp, type TestApp } from './support/app';
import { dataUri, image } from './support/media';
import { NatsServer, freePort } from './support/nats-server';

async function pollStatus(
  url: string,
  want: number,
  withinMs: number,
  path = '/health/ready',
): Promise<number> {
  const started = Date.now();
  let last: request.Response | undefined;
  await waitFor(
    async () => (last = await request(url).get(path)).status === want,
    withinMs,
    20,
    () => `${path} stayed ${last?.status}: ${JSON.stringify(last?.body)}`,
  );
  return Date.now() - started;
}

/**
 * An app on a nats-server of its own, for one describe block: started before its tests,
 * closed after them; `own()` gives both once started.
 */
function withOwnNats(): () => { nats: NatsServer; t: TestApp } {
  let nats: NatsServer;
  let t: TestApp;
  beforeAll(async () => {
    nats = await NatsServer.start();
    t = await startTestApp({ EPD_NATS_URL: nats.url });
  });
  afterAll(async () => {
    await t.close();
    await nats.dispose();
  });
  return () => ({ nats, t });
}

describe('health (e2e, own nats-server)', () => {
  const own = withOwnNats();
  let nats: NatsServer;
  let t: TestApp;
  beforeAll(() => ({ nats, t } = own()));

  it('reports NATS (with RTT), registry bounds and event-loop lag when ready', async () => {
    const res = await request(t.httpUrl).get('/health');
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('ok');
    expect(res.body.details.nats).toMatchObject({ status: 'up', state: 'connected' });
    expect(typeof res.body.details.nats.rtt_ms).toBe('number');
    expect(res.body.details.registry).toMatchObject({ status: 'up', entries: 0, waiters: 0 });
    expect(res.body.details.event_loop.status).toBe('up');
    expect((await request(t.httpUrl).get('/health/ready')).status).toBe(200);
  });

  it('losing NATS: /health/ready goes 503 within 1 s; /health stays 200 (SGLang: "can encode"), reports NATS down, and HTTP encode still works', async () => {
    await nats.stop();
    const tookMs = await pollStatus(t.httpUrl, 503, 1000);
    expect(tookMs).toBeLessThanOrEqual(1000);
    const down = await request(t.httpUrl).get('/health/ready');
    expect(down.status).toBe(503);
    expect(down.body.error.nats).toMatchObject({ status: 'down' });

    const health = await request(t.httpUrl).get('/health');
    expect(health.status).toBe(200);
    expect(health.body.details.nats).toMatchObject({ status: 'down' });
    expect(health.body.details.encoder.status).toBe('up');
    const png = await image(56, 56);
    const enc = await request(t.httpUrl)
      .post('/encode')
      .send({
        req_id: 'no-nats',
        modality: 'image',
        mm_items: [dataUri(png, 'image/png')],
        num_parts: 1,
        part_idx: 0,
      });
    expect(enc.status).toBe(200);
    const meta = await request(t.httpUrl)
      .post('/scheduler_receive_meta_data')
      .send({ req_id: 'no-nats', part_idx: 0 });
    expect(meta.body).toMatchObject({ req_id: 'no-nats', embedding_len: 4 });
    expect((await request(t.httpUrl).get('/health/live')).status).toBe(200);

    await nats.restart();
    await pollStatus(t.httpUrl, 200, 10_000);
    expect((await request(t.httpUrl).get('/health')).body.details.nats.status).toBe('up');
  });
});

describe('readiness is cheap, the deep check encodes (e2e)', () => {
  // Reproduced first: /health/ready ran the probe encode (a forward, unless one had run in
  // the last 5 s), so with a real tower on CPU a busy pod missed kubelet's 1 s timeout on
  // every probe and went NotReady. Counted here by forwards, not by time.
  const own = withOwnNats();
  let nats: NatsServer;
  let t: TestApp;
  beforeAll(() => ({ nats, t } = own()));

  const forwards = async (): Promise<number> =>
    ((await request(t.httpUrl).get('/admin/encoder')).body as { batches: number }).batches;

  it('/health/ready runs no forward (models loaded is enough); /health/deep runs the probe encode', async () => {
    await pollStatus(t.httpUrl, 200, 10_000);
    const before = await forwards();
    for (let i = 0; i < 3; i++) {
      const ready = await request(t.httpUrl).get('/health/ready');
      expect([ready.status, ready.body.error]).toEqual([200, {}]);
      expect(ready.body.details.encoder).toMatchObject({ status: 'up', models_loaded: true });
      expect(ready.body.details.serving.status).toBe('up');
    }
    expect(await forwards()).toBe(before);
    const deep = await request(t.httpUrl).get('/health/deep');
    expect(deep.status).toBe(200);
    expect(deep.body.details.encoder).toMatchObject({ status: 'up', source: 'probe' });
    expect(deep.body.details.nats.status).toBe('up');
    expect(await forwards()).toBe(before + 1);
    // Within the probe's 5 s cache: not repeated.
    await request(t.httpUrl).get('/health/deep');
    expect(await forwards()).toBe(before + 1);
  });

  it('NATS lost: both fail (readiness still routes on NATS), /health still encodes', async () => {
    await nats.stop();
    await pollStatus(t.httpUrl, 503, 5000);
    await pollStatus(t.httpUrl, 503, 5000, '/health/deep');
    expect((await request(t.httpUrl).get('/health')).status).toBe(200);
    await nats.restart();
    await pollStatus(t.httpUrl, 200, 10_000);
    await pollStatus(t.httpUrl, 200, 10_000, '/health/deep');
  });
});

describe('start-up while NATS is unreachable (e2e)', () => {
  it('serves HTTP, says why it is not ready, and connects once NATS appears', async () => {
    const port = await freePort();
    const t = await startTestApp(
      { EPD_NATS_URL: `nats://127.0.0.1:${port}` },
      { waitForNats: false },
    );
    let nats: NatsServer | undefined;
    try {
      expect((await request(t.httpUrl).get('/health/live')).status).toBe(200);
      const res = await request(t.httpUrl).get('/health/ready');
      expect(res.status).toBe(503);
      expect(res.body.error.nats).toMatchObject({ status: 'down', state: 'connecting' });
      expect(res.body.error.nats.error).toMatch(/ECONNREFUSED|CONNECTION_REFUSED|refused/i);
      const health = await request(t.httpUrl).get('/health');
      expect(health.status).toBe(200);
      expect(health.body.details.nats).toMatchObject({ status: 'down', state: 'connecting' });

      nats = await NatsServer.start({ port });
      await pollStatus(t.httpUrl, 200, 10_000);
    } finally {
      await t.close();
      await nats?.dispose();
    }
  });
});
