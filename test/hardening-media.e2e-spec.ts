import { waitFor } from './support/wait';
import { createServer, type Server, type ServerResponse } from 'node:http';
import request from 'supertest';
import { startTestApp, type TestApp } from './support/app';
import { encodeBody } from './support/calls';
import { image } from './support/media';

/**
 * Regression tests for "Hardening first", defects 4 (the SSRF guard was bypassed for IP
 * literals) and 5 (the encode deadline did not cover media loading), with the probe's
 * inputs, against a real HTTP server on 127.0.0.1.
 */
describe('media fetch hardening (e2e)', () => {
  let server: Server;
  let port: number;
  let hits = 0;
  const drips: ServerResponse[] = [];
  let png: Buffer;

  beforeAll(async () => {
    png = await image(64, 64);
    server = createServer((req, res) => {
      hits++;
      const url = req.url ?? '';
      if (url === '/x.png') return res.writeHead(200, { 'content-type': 'image/png' }).end(png);
      if (url === '/drip') {
        // 1 byte a second, forever (until the client goes).
        drips.push(res);
        res.writeHead(200, { 'content-type': 'image/png' });
        const timer = setInterval(() => res.write(Buffer.of(0x89)), 1000);
        res.on('close', () => clearInterval(timer));
        return;
      }
      const hop = /^\/hop\/(\d)$/.exec(url);
      if (hop) {
        const n = Number(hop[1]);
        // Each hop answers within the fetch timeout; the chain as a whole does not.
        setTimeout(
          () => res.writeHead(302, { location: n < 3 ? `/hop/${n + 1}` : '/x.png' }).end(),
          400,
        );
        return;
      }
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as { port: number }).port;
  });
  afterAll(async () => {
    for (const d of drips) d.destroy();
    await new Promise((r) => server.close(r));
  });

  const encode = (t: TestApp, url: string, extra: object = {}) =>
    request(t.httpUrl)
      .post('/encode')
      .send({ ...encodeBody(`m-${Math.random()}`, [url]), ...extra });

  it('ssrf-ip-literal: loopback IP literals (dotted, decimal, hex, IPv6) are refused before any connection', async () => {
    const t = await startTestApp({ EPD_ALLOWED_MEDIA_DOMAINS: '127.0.0.1,::1,::ffff:7f00:1' });
    try {
      hits = 0;
      for (const url of [
        `http://127.0.0.1:${port}/x.png`,
        `http://2130706433:${port}/x.png`,
        `http://0x7f.0.0.1:${port}/x.png`,
        `http://127.1:${port}/x.png`,
        `http://[::1]:${port}/x.png`,
        `http://[::ffff:127.0.0.1]:${port}/x.png`,
      ]) {
        const r = await encode(t, url);
        expect([url, r.status]).toEqual([url, 400]);
        expect(r.body.message).toMatch(/is a loopback\/private address, which is not allowed/);
      }
      expect(hits).toBe(0);
      // With private networks allowed, the same literal is fetched.
    } finally {
      await t.close();
    }
    const open = await startTestApp({
      EPD_ALLOWED_MEDIA_DOMAINS: '127.0.0.1',
      EPD_MEDIA_ALLOW_PRIVATE_NETWORKS: 'true',
    });
    try {
      const r = await encode(open, `http://2130706433:${port}/x.png`);
      expect(r.status).toBe(200);
      expect(hits).toBe(1);
    } finally {
      await open.close();
    }
  });

  describe('loading within the deadline', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await startTestApp({
        EPD_ALLOWED_MEDIA_DOMAINS: '127.0.0.1',
        EPD_MEDIA_ALLOW_PRIVATE_NETWORKS: 'true',
        EPD_MAX_PENDING: '4',
        EPD_MEDIA_FETCH_TIMEOUT_MS: '30000',
      });
    });
    afterAll(() => t.close());

    it("encode-deadline-load: a 1 byte/s URL with timeout_ms 2000 is a 504 at the request's deadline, not a 400 after the 30 s fetch timeout", async () => {
      const r = await encode(t, `http://127.0.0.1:${port}/drip`, { timeout_ms: 2000 });
      expect(r.status).toBe(504);
      expect(r.body.message).toBe("media loading did not finish within the request's deadline");
    });

    it('encode-deadline-load: drip requests filling every admission slot free them at their deadline', async () => {
      const drip = Array.from({ length: 4 }, () =>
        // .then() sends it now (supertest sends lazily).
        encode(t, `http://127.0.0.1:${port}/drip`, { timeout_ms: 1500 }).then((r) => r),
      );
      // Meanwhile the service is full (every slot holds a drip): 503, as before the fix.
      await waitFor(
        async () =>
          ((await request(t.httpUrl).get('/admin/requests')).body as { pending: number })
            .pending === 4,
      );
      expect((await encode(t, `http://127.0.0.1:${port}/x.png`)).status).toBe(503);
      for (const r of await Promise.all(drip)) expect(r.status).toBe(504);
      const after = await encode(t, `http://127.0.0.1:${port}/x.png`);
      expect(after.status).toBe(200);
      const admin = (await request(t.httpUrl).get('/admin/requests')).body as { pending: number };
      expect(admin.pending).toBe(0);
    });
  });

  it('redirect-chain-timeout: one timeout covers the whole redirect chain, not one per hop', async () => {
    const t = await startTestApp({
      EPD_ALLOWED_MEDIA_DOMAINS: '127.0.0.1',
      EPD_MEDIA_ALLOW_PRIVATE_NETWORKS: 'true',
      EPD_MEDIA_FETCH_TIMEOUT_MS: '1000',
    });
    try {
      // 3 hops of 400 ms each: every hop fits in 1 s, the chain does not.
      const r = await encode(t, `http://127.0.0.1:${port}/hop/1`);
      expect(r.status).toBe(400);
      expect(r.body.message).toMatch(/timed out after 1000 ms/);
    } finally {
      await t.close();
    }
  });
});
