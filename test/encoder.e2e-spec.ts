import { expectOk, waitFor } from './support/wait';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import request from 'supertest';
import { encodeBody, natsCall } from './support/calls';
import { sharedNatsUrl, startTestApp, type TestApp } from './support/app';
import { animatedGif, dataUri, image, sha256, tone } from './support/media';

type Reply = {
  response?: Record<string, unknown> & { timings?: Record<string, number> };
  err?: Record<string, unknown>;
};

describe('encoder pipeline (e2e, real ONNX Runtime)', () => {
  let t: TestApp;
  let nc: NatsConnection;
  let png224: Buffer;
  const profileRoot = mkdtempSync(join(tmpdir(), 'epd-prof-'));

  const call = (dp: string, data: unknown, timeout = 30_000) =>
    natsCall(nc, t, dp, data, { timeout }) as Promise<Reply>;
  const staged = async () =>
    (await request(t.httpUrl).get('/admin/requests')).body as {
      staging: { usedBytes: number; states: number };
      requests: {
        req_id: string;
        bytes: number;
        embedding_len: number;
        embedding_dim: number;
        state: string;
      }[];
    };

  beforeAll(async () => {
    t = await startTestApp({ EPD_PROFILE_ROOT: profileRoot });
    nc = await connect({ servers: sharedNatsUrl() });
    png224 = await image(224, 224);
  });
  afterAll(async () => {
    await nc.drain();
    await t.close();
  });
  // Every test releases what it encoded: nothing staged and no pending work after any one.
  afterEach(async () => {
    const s = await staged();
    expect(s.staging).toMatchObject({ usedBytes: 0, states: 0 });
    expect((await t.registry.stats()).waiters).toBe(0);
  });

  it('encodes an image over NATS: metadata matches Qwen2-VL grids and the staged embedding', async () => {
    const jpeg = await image(1024, 768, 'jpeg');
    const reply = await call('encode', encodeBody('img-1', [dataUri(jpeg, 'image/jpeg')]));
    expect(reply.err).toBeUndefined();
    // 1024x768 → smart-resize 1036x756 → grid 54x74 → 999 tokens
    expect(reply.response).toMatchObject({
      req_id: 'img-1',
      part_idx: 0,
      embedding_len: 999,
      embedding_dim: 1024,
      embedding_size: 999 * 1024 * 4,
    });
    const timings = reply.response!.timings!;
    for (const k of [
      'queue_ms',
      'load_ms',
      'preprocess_ms',
      'forward_ms',
      'stage_ms',
      'total_ms',
    ]) {
      expect(typeof timings[k]).toBe('number');
    }
    expect(timings.forward_ms).toBeGreaterThan(0);
    const entry = (await staged()).requests.find((r) => r.req_id === 'img-1')!;
    expect(entry).toMatchObject({
      state: 'staged',
      bytes: 999 * 1024 * 4,
      embedding_len: 999,
      embedding_dim: 1024,
    });
    const meta = await call('wait_metadata', { req_id: 'img-1' });
    expect(meta.response).toMatchObject({
      embedding_len: 999,
      embedding_dim: 1024,
      embedding_size: 999 * 1024 * 4,
    });
    expect(await call('release', { req_id: 'img-1' })).toMatchObject({ response: null });
  });

  it('encodes over HTTP with the same result shape; several images sum their tokens', async () => {
    const res = await request(t.httpUrl)
      .post('/encode')
      .send(
        encodeBody('http-1', [dataUri(png224, 'image/png'), png224.toString('base64')], 'IMAGE'),
      );
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      embedding_len: 128,
      embedding_dim: 1024,
      embedding_size: 128 * 4096,
    });
    await request(t.httpUrl).post('/admin/requests/http-1/release').expect(200);
  });

  it('publishes metadata before the forward: a waiter that started first is answered before the encode returns', async () => {
    const big = await image(1600, 1200, 'jpeg');
    const order: string[] = [];
    const waiting = call('wait_metadata', { req_id: 'early' }).then((r) => {
      order.push('metadata');
      return r;
    });
    const encoding = call('encode', encodeBody('early', [dataUri(big, 'image/jpeg')])).then((r) => {
      order.push('encode');
      return r;
    });
    const [meta, enc] = await Promise.all([waiting, encoding]);
    expect(order).toEqual(['metadata', 'encode']);
    expect(meta.response).toMatchObject({
      embedding_len: enc.response!.embedding_len,
      embedding_dim: 1024,
      embedding_size: enc.response!.embedding_size,
    });
    await call('release', { req_id: 'early' });
  });

  it("encodes audio (16 kHz PCM16 and 44.1 kHz float WAV): Qwen2-Audio's tokens for its mel frames", async () => {
    // 1 s: 100 mel frames → ((100 − 1) // 2 + 1 − 2) // 2 + 1 = 25 tokens.
    const a = await call('encode', encodeBody('aud-1', [dataUri(tone(1.0), 'audio/wav')], 'audio'));
    expect(a.response).toMatchObject({ embedding_len: 25, embedding_dim: 1024 });
    // 0.5 s at 44.1 kHz: resampled to 8000 samples, 50 frames → 12 tokens.
    const b = await call(
      'encode',
      encodeBody('aud-2', [dataUri(tone(0.5, 44100, 'float32'), 'audio/wav')], 'audio'),
    );
    expect(b.response).toMatchObject({ embedding_len: 12 });
    await call('release', { req_id: 'aud-1' });
    await call('release', { req_id: 'aud-2' });
  });

  it('encodes FLAC, Ogg Vorbis and MP3 as it encodes WAV, and refuses an audio bomb from its frames', async () => {
    const fixture = (name: string, ext = name) =>
      readFileSync(
        join(__dirname, 'fixtures', 'audio', `${ext === name ? 'tone-1.5s-22k' : name}.${ext}`),
      );
    for (const [ext, mime] of [
      ['flac', 'audio/flac'],
      ['ogg', 'audio/ogg'],
      ['mp3', 'audio/mpeg'],
    ] as const) {
      const r = await call(
        'encode',
        encodeBody(`aud-${ext}`, [dataUri(fixture(ext), mime)], 'audio'),
      );
      // 1.5 s: 150 mel frames → 37 tokens.
      expect(r.response).toMatchObject({ embedding_len: 37, embedding_dim: 1024 });
      await call('release', { req_id: `aud-${ext}` });
    }
    // 119 KB of FLAC that decodes to 230 MB (300 s of 96 kHz stereo silence): refused from
    // its frames, before a sample is decoded.
    const bomb = await call(
      'encode',
      encodeBody(
        'aud-bomb',
        [dataUri(fixture('silence-300s-96k-stereo', 'flac'), 'audio/flac')],
        'audio',
      ),
    );
    expect(bomb.err).toMatchObject({ code: 413, type: 'limit_exceeded' });
    expect(bomb.err!.message).toBe(
      'request has 230400000 bytes of decoded audio, more than the limit of 134217728 (EPD_MAX_DECODED_AUDIO_BYTES)',
    );
  });

  it('encodes video from an animated image: two frames per temporal patch', async () => {
    const gif = await animatedGif(112, 112, 5);
    const r = await call('encode', encodeBody('vid-1', [dataUri(gif, 'image/gif')], 'video'));
    // 5 frames → t=3 (last repeated), 112x112 → 8x8 patches → 3*64/4 = 48 tokens
    expect(r.response).toMatchObject({ embedding_len: 48 });
    await call('release', { req_id: 'vid-1' });
  });

  it('encodes video from a list of frames as one video', async () => {
    const frame = (r: number) => image(112, 112, 'png', { r, g: 10, b: 10 });
    const frames = await Promise.all([frame(10), frame(60), frame(110), frame(160)]);
    const items = frames.map((f) => dataUri(f, 'image/png'));
    const r = await call('encode', encodeBody('vid-2', items, 'video'));
    // 4 frames → t=2, 112x112 → 8x8 patches → 2*64/4 = 32 tokens
    expect(r.response).toMatchObject({ embedding_len: 32, embedding_size: 32 * 1024 * 4 });
    await call('release', { req_id: 'vid-2' });
  });

  it('answers 400 with the exact validation message before queueing anything', async () => {
    const r = await call('encode', { ...encodeBody('bad', ['x']), modality: 'smell' });
    expect(r.err).toEqual({
      status: 'error',
      code: 400,
      type: 'invalid_request',
      message: 'unsupported modality: smell',
      req_id: 'bad',
    });
    const h = await request(t.httpUrl)
      .post('/encode')
      .send({ ...encodeBody('bad2', ['x']), part_idx: 3 });
    expect(h.status).toBe(400);
    expect(h.body).toMatchObject({ message: 'part_idx must be in [0, 1)', req_id: 'bad2' });
    expect((await staged()).staging.states).toBe(0);
  });

  it('fails a corrupt image alone among concurrent requests, and publishes its error for waiters', async () => {
    const corrupt = Buffer.concat([png224.subarray(0, 40), Buffer.alloc(200, 7)]);
    const ids = Array.from({ length: 6 }, (_, i) => `mix-${i}`);
    const replies = await Promise.all(
      ids.map((id, i) =>
        call('encode', encodeBody(id, [dataUri(i === 3 ? corrupt : png224, 'image/png')])),
      ),
    );
    replies.forEach((r, i) => {
      if (i === 3) {
        expect(r.err).toMatchObject({
          code: 400,
          message: expect.stringMatching(/^Error while loading data data:image\/png;base64,.*…/),
        });
      } else expect(r.response).toMatchObject({ embedding_len: 64 });
    });
    const meta = await call('wait_metadata', { req_id: 'mix-3', timeout_ms: 100 });
    expect(meta.err).toMatchObject({
      code: 500,
      message: expect.stringMatching(/^Error while loading data/),
    });
    for (const id of ids) await call('release', { req_id: id });
  });

  it('verifies content_hash', async () => {
    const ok = await call(
      'encode',
      encodeBody('hash-ok', []).mm_items.length === 0
        ? {
            ...encodeBody('hash-ok', ['x']),
            mm_items: [{ url: dataUri(png224, 'image/png'), content_hash: sha256(png224) }],
          }
        : {},
    );
    expect(ok.response).toMatchObject({ embedding_len: 64 });
    const wrong = 'f'.repeat(64);
    const bad = await call('encode', {
      ...encodeBody('hash-bad', ['x']),
      mm_items: [{ url: dataUri(png224, 'image/png'), content_hash: wrong }],
    });
    expect(bad.err).toMatchObject({
      code: 400,
      message: `Encoder media content hash mismatch: expected ${wrong}, got ${sha256(png224)}`,
    });
    await call('release', { req_id: 'hash-ok' });
  });

  it('answers 409 to a second encode of an active req_id, and fails fast after an early release', async () => {
    const body = encodeBody('dup', [dataUri(png224, 'image/png')]);
    expectOk(await call('encode', body));
    expect((await call('encode', body)).err).toMatchObject({ code: 409 });
    await call('release', { req_id: 'dup' });
    expectOk(await call('encode', body)); // a new request after release
    await call('release', { req_id: 'dup' });

    await call('release', { req_id: 'never-started' });
    const late = await call('encode', encodeBody('never-started', [dataUri(png224, 'image/png')]));
    expect(late.err).toMatchObject({
      code: 409,
      message: 'Encoder request was released: never-started',
    });
  });

  it('runs the health probe over NATS and HTTP and reports it in readiness', async () => {
    expect((await call('health_encode', {})).response).toMatchObject({ ok: true });
    const h = await request(t.httpUrl).get('/health_generate');
    expect(h.status).toBe(200);
    expect(h.body).toMatchObject({ ok: true });
    const ready = await request(t.httpUrl).get('/health/ready');
    expect(ready.body.details.encoder.status).toBe('up');
  });

  it('writes a readable V8 .cpuprofile between start_profile and stop_profile', async () => {
    const dir = mkdtempSync(join(profileRoot, 'run-'));
    const start = await call('start_profile', { output_dir: dir, profile_prefix: 'e2e' });
    expect(start.response).toMatchObject({
      ok: true,
      msg: expect.stringContaining(`output_dir=${dir}`),
    });
    expect((await call('start_profile', {})).err).toMatchObject({
      code: 400,
      message: 'profiling already running',
    });
    await call('encode', encodeBody('prof-1', [dataUri(png224, 'image/png')]));
    const stop = await call('stop_profile', {});
    expect(stop.response).toMatchObject({ ok: true });
    expect((await call('stop_profile', {})).err).toMatchObject({
      code: 400,
      message: 'profiling not running',
    });
    const files = readdirSync(dir);
    expect(files).toHaveLength(1);
    expect(files[0]).toMatch(/^e2e-rank0-\d+\.cpuprofile$/);
    const profile = JSON.parse(readFileSync(join(dir, files[0]!), 'utf8')) as {
      nodes: unknown[];
      samples: unknown[];
    };
    expect(profile.nodes.length).toBeGreaterThan(0);
    await call('release', { req_id: 'prof-1' });

    // HTTP, with num_steps stopping on its own
    const s = await request(t.httpUrl)
      .post('/start_profile')
      .send({ output_dir: dir, profile_prefix: 'steps', num_steps: 1 });
    expect(s.status).toBe(200);
    expect(s.text).toMatch(/^Start profiling\./);
    await call('encode', encodeBody('prof-2', [dataUri(png224, 'image/png')]));
    await waitFor(() => readdirSync(dir).some((f) => f.startsWith('steps-')));
    expect(readdirSync(dir).some((f) => f.startsWith('steps-rank0-'))).toBe(true);
    expect((await request(t.httpUrl).get('/stop_profile')).status).toBe(400);
    expect(
      (await request(t.httpUrl).post('/start_profile').send({ output_dir: '/etc' })).status,
    ).toBe(400);
    await call('release', { req_id: 'prof-2' });
  });
});

describe('media URLs (e2e, local HTTP server on 127.0.0.1)', () => {
  let server: Server;
  let base: string;
  let png: Buffer;

  beforeAll(async () => {
    png = await image(64, 64);
    server = createServer((req, res) => {
      if (req.url === '/img.png')
        return res.writeHead(200, { 'content-type': 'image/png' }).end(png);
      if (req.url === '/big') {
        res.writeHead(200); // no content-length: the cap must hold while streaming
        const chunk = Buffer.alloc(64 * 1024, 1);
        let sent = 0;
        const pump = () => {
          while (sent < 4 * 1024 * 1024) {
            sent += chunk.length;
            if (!res.write(chunk)) return res.once('drain', pump);
          }
          res.end();
        };
        return pump();
      }
      if (req.url === '/redirect-out')
        return res.writeHead(302, { location: 'http://example.invalid/x.png' }).end();
      if (req.url === '/redirect-in') return res.writeHead(302, { location: '/img.png' }).end();
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  async function encodeUrl(t: TestApp, url: string) {
    return request(t.httpUrl)
      .post('/encode')
      .send({
        req_id: `u-${Math.random()}`,
        modality: 'image',
        mm_items: [url],
        num_parts: 1,
        part_idx: 0,
      });
  }

  it('loads allowed URLs, follows allowed redirects, and enforces the size cap and the allow-list', async () => {
    const t = await startTestApp({
      EPD_ALLOWED_MEDIA_DOMAINS: '127.0.0.1',
      EPD_MEDIA_ALLOW_PRIVATE_NETWORKS: 'true',
      EPD_MEDIA_MAX_BYTES: String(1024 * 1024),
    });
    try {
      expect((await encodeUrl(t, `${base}/img.png`)).body).toMatchObject({ embedding_len: 4 });
      expect((await encodeUrl(t, `${base}/redirect-in`)).body).toMatchObject({ embedding_len: 4 });
      const big = await encodeUrl(t, `${base}/big`);
      // Too many bytes is a limit, as too many pixels is: 413 limit_exceeded.
      expect(big.status).toBe(413);
      expect(big.body).toMatchObject({ type: 'limit_exceeded' });
      expect(big.body.message).toMatch(/media is larger than 1048576 bytes/);
      const out = await encodeUrl(t, `${base}/redirect-out`);
      expect(out.body.message).toMatch(
        /domain example\.invalid is not in EPD_ALLOWED_MEDIA_DOMAINS/,
      );
      const missing = await encodeUrl(t, `${base}/nope.png`);
      expect(missing.body.message).toMatch(/HTTP 404/);
    } finally {
      await t.close();
    }
  });

  it('refuses URLs by default, and loopback targets unless private networks are allowed', async () => {
    const closed = await startTestApp();
    try {
      const r = await encodeUrl(closed, `${base}/img.png`);
      expect(r.status).toBe(400);
      expect(r.body.message).toMatch(/remote URLs are disabled/);
    } finally {
      await closed.close();
    }
    const noPrivate = await startTestApp({ EPD_ALLOWED_MEDIA_DOMAINS: 'localhost' });
    try {
      const r = await encodeUrl(noPrivate, `${base.replace('127.0.0.1', 'localhost')}/img.png`);
      expect(r.status).toBe(400);
      expect(r.body.message).toMatch(/resolves only to loopback\/private addresses/);
    } finally {
      await noPrivate.close();
    }
  });
});
