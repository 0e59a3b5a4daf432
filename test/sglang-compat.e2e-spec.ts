import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import request from 'supertest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { sharedNatsUrl, startTestApp, type TestApp } from './support/app';
import { natsCall, waitFor } from './support/calls';
import { dataUri } from './support/media';

/**
 * What SGLang's own client sends, exactly as it sends it: a real-photo-sized image
 * inline as a data URI, its extra /encode fields, an empty req_id, and /start_profile
 * bodies that FastAPI coerces.
 */
describe('SGLang client compatibility (e2e, HTTP)', () => {
  let t: TestApp;
  let nc: NatsConnection;
  let photoBody: string;
  const profileRoot = mkdtempSync(join(tmpdir(), 'epd-compat-profiles-'));

  beforeAll(async () => {
    // 1600×1200 of random pixels: as incompressible as a camera photo, 5.8 MB as PNG.
    const pixels = randomBytes(1600 * 1200 * 3);
    const png = await sharp(pixels, { raw: { width: 1600, height: 1200, channels: 3 } })
      .png()
      .toBuffer();
    photoBody = JSON.stringify({
      req_id: 'photo',
      modality: 'image',
      mm_items: [dataUri(png, 'image/png')],
      num_parts: 1,
      part_idx: 0,
    });
    // The body limit is exactly this request: the test below sends it, then one byte more.
    t = await startTestApp({
      EPD_HTTP_MAX_BODY_BYTES: String(Buffer.byteLength(photoBody)),
      EPD_PROFILE_ROOT: profileRoot,
    });
    nc = await connect({ servers: sharedNatsUrl() });
  });
  afterAll(async () => {
    await nc.drain();
    await t.close();
  });

  const post = (path: string, body: string | object) =>
    request(t.httpUrl)
      .post(path)
      .set('content-type', 'application/json')
      .send(body)
      .then((r) => r);

  it('encodes a real-photo-sized image sent inline as a data URI; one byte over the body limit is 413', async () => {
    expect(Buffer.byteLength(photoBody)).toBeGreaterThan(6 * 1024 * 1024);
    const ok = await post('/encode', photoBody);
    expect(ok.status).toBe(200);
    // smart_resize(1200, 1600) under max_pixels 1003520: 840×1148, a 60×82 patch grid,
    // 2×2 merged: 1230 tokens.
    expect(ok.body).toMatchObject({ req_id: 'photo', embedding_len: 1230, embedding_dim: 1024 });
    await natsCall(nc, t, 'release', { req_id: 'photo' });

    const over = await post('/encode', `${photoBody} `);
    expect(over.status).toBe(413);
    expect(over.body).toMatchObject({ type: 'payload_too_large' });
    expect(over.body.message).toContain('EPD_HTTP_MAX_BODY_BYTES');
  });

  it('echoes req_id exactly as sent: "" stays "" (HTTP and NATS)', async () => {
    const res = await post('/encode', { req_id: '', modality: 'image', mm_items: ['x'] });
    expect(res.status).toBe(400);
    expect(res.body.req_id).toBe('');
    const reply = await natsCall(nc, t, 'wait_metadata', { req_id: '' });
    expect(reply.err).toMatchObject({ code: 400, req_id: '' });
  });

  it("accepts and ignores SGLang's extra /encode fields and per-item detail", async () => {
    const png = await sharp({
      create: { width: 56, height: 56, channels: 3, background: { r: 1, g: 2, b: 3 } },
    })
      .png()
      .toBuffer();
    const res = await post('/encode', {
      req_id: 'extras',
      modality: 'IMAGE',
      mm_items: [{ url: dataUri(png, 'image/png'), detail: 'high' }],
      num_parts: 1,
      part_idx: 0,
      encoder_idx: 3,
      encoder_url: 'http://127.0.0.1:1',
      time_stats_json: '{"tokenizer": 1.5}',
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ req_id: 'extras', embedding_len: 4 });
    await natsCall(nc, t, 'release', { req_id: 'extras' });
  });

  it('/start_profile coerces as FastAPI does: num_steps "5" is 5, profile_prefix null is absent', async () => {
    const start = await post('/start_profile', {
      output_dir: profileRoot,
      num_steps: '5',
      profile_prefix: null,
      with_stack: 'true',
    });
    expect(start.status).toBe(200);
    const stop = await post('/stop_profile', {});
    expect(stop.status).toBe(200);
    const bad = await post('/start_profile', { num_steps: 'five' });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain('num_steps');
  });
});

describe('self-registration with SGLang encoder bootstrap (e2e)', () => {
  it('registers once HTTP listens (retrying while the bootstrap server refuses), and unregisters at shutdown', async () => {
    const calls: { method: string; path: string; body: { url?: string } }[] = [];
    let refuse = 2; // the first attempts fail, as when the bootstrap server is still starting
    const server = createServer((req, res) => {
      let raw = '';
      req.on('data', (c: Buffer) => (raw += c.toString()));
      req.on('end', () => {
        calls.push({ method: req.method!, path: req.url!, body: JSON.parse(raw || '{}') });
        if (req.url === '/register_encoder_url' && refuse-- > 0) {
          res.writeHead(503).end('starting');
          return;
        }
        res.writeHead(200).end('OK');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const bootstrap = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const app = await startTestApp({ EPD_SGLANG_BOOTSTRAP_URL: bootstrap });
    try {
      expect(
        await waitFor(
          () => calls.filter((c) => c.path === '/register_encoder_url').length === 3,
          10_000,
        ),
      ).toBe(true);
      expect(calls.at(-1)).toEqual({
        method: 'POST',
        path: '/register_encoder_url',
        body: { url: app.httpUrl },
      });
      // What the bootstrap server then probes every 10 s: it must say we can encode.
      expect((await request(app.httpUrl).get('/health')).status).toBe(200);
    } finally {
      await app.close();
      server.close();
    }
    expect(calls.at(-1)).toEqual({
      method: 'DELETE',
      path: '/unregister_encoder_url',
      body: { url: app.httpUrl },
    });
  });
});
