import request from 'supertest';
import { startTestApp, type TestApp } from './support/app';
import { NatsServer, freePort } from './support/nats-server';

async function pollStatus(url: string, want: number, withinMs: number): Promise<number> {
  const started = Date.now();
  for (;;) {
    const res = await request(url).get('/health');
    if (res.status === want) return Date.now() - started;
    if (Date.now() - started > withinMs)
      throw new Error(`/health stayed ${res.status}: ${JSON.stringify(res.body)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('health (e2e, own nats-server)', () => {
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

  it('goes 503 within 1 s of losing NATS, keeps /health/live at 200, and recovers', async () => {
    await nats.stop();
    const tookMs = await pollStatus(t.httpUrl, 503, 1000);
    expect(tookMs).toBeLessThanOrEqual(1000);
    const down = await request(t.httpUrl).get('/health/ready');
    expect(down.status).toBe(503);
    expect(down.body.error.nats).toMatchObject({ status: 'down' });
    expect((await request(t.httpUrl).get('/health/live')).status).toBe(200);

    await nats.restart();
    await pollStatus(t.httpUrl, 200, 10_000);
    expect((await request(t.httpUrl).get('/health')).body.details.nats.status).toBe('up');
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
      const res = await request(t.httpUrl).get('/health');
      expect(res.status).toBe(503);
      expect(res.body.error.nats).toMatchObject({ status: 'down', state: 'connecting' });
      expect(res.body.error.nats.error).toMatch(/ECONNREFUSED|CONNECTION_REFUSED|refused/i);

      nats = await NatsServer.start({ port });
      await pollStatus(t.httpUrl, 200, 10_000);
    } finally {
      await t.close();
      await nats?.dispose();
    }
  });
});
