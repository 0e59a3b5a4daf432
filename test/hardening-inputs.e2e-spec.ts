import { expectOk } from './support/wait';
import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { createServer, type Server, type Socket } from 'node:net';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import request from 'supertest';
import sharp from 'sharp';
import { DeliveryService } from '../src/delivery/delivery.service';
import { TcpEmbeddingSender } from '../src/transfer/tcp-sender.service';
import { EmbeddingTransport } from '../src/transfer/embedding-transport';
import { sharedNatsUrl, startTestApp, type TestApp } from './support/app';
import { encodeBody, natsCall, waitFor } from './support/calls';
import { dataUri, image } from './support/media';
import { recordFault } from './support/fault-report';
import { CallLedger, leftBehind } from './support/ledger';

/**
 * Regression tests for "Hardening first", defects 3 (HTTP body limit), 7 (req_id length),
 * 8 (500 where 400 is due) and 9 (/send after the caller left, isDisposed, /admin/workers),
 * each with the probe's input.
 */
describe('input hardening (e2e)', () => {
  let t: TestApp;
  let nc: NatsConnection;
  beforeAll(async () => {
    t = await startTestApp({ EPD_SEND_TIMEOUT_MS: '60000' });
    nc = await connect({ servers: sharedNatsUrl() });
  });
  afterAll(async () => {
    await nc.drain();
    await t.close();
  });
  afterEach(async () => {
    // Every test leaves nothing staged behind it.
    for (const r of (await request(t.httpUrl).get('/admin/requests')).body.requests as {
      req_id: string;
    }[])
      await natsCall(nc, t, 'release', { req_id: r.req_id });
  });

  it('http-body-limit: a 6 MB data URI of a 1600x1200 incompressible photo encodes over HTTP', async () => {
    const photo = await sharp(randomBytes(1600 * 1200 * 3), {
      raw: { width: 1600, height: 1200, channels: 3 },
    })
      .png({ compressionLevel: 0 })
      .toBuffer();
    const uri = dataUri(photo, 'image/png');
    expect(uri.length).toBeGreaterThan(6_000_000);
    const r = await request(t.httpUrl)
      .post('/encode')
      .send(encodeBody('photo', [uri]));
    expect(r.status).toBe(200);
    // 1600x1200 → smart-resize under max_pixels 1003520: 840x1148 → 30x41 merged tokens
    expect(r.body).toMatchObject({ req_id: 'photo', embedding_len: 1230 });
  });

  it('req-id-length: a 600-character req_id is refused by encode as by every other route, and nothing is staged', async () => {
    const png = dataUri(await image(56, 56), 'image/png');
    const id = 'r'.repeat(600);
    const nats = await natsCall(nc, t, 'encode', encodeBody(id, [png]));
    expect(nats.err).toMatchObject({ code: 400, message: 'req_id is longer than 512 characters' });
    const http = await request(t.httpUrl)
      .post('/encode')
      .send(encodeBody(id, [png]));
    expect(http.status).toBe(400);
    const ok = await natsCall(nc, t, 'encode', encodeBody('r'.repeat(512), [png]));
    expect(ok.response).toMatchObject({ embedding_len: 4 });
    const staged = (await request(t.httpUrl).get('/admin/requests')).body.requests as unknown[];
    expect(staged).toHaveLength(1);
  });

  it('deep-json-500: num_parts nested 10,000 levels deep is a 400 over HTTP and NATS, not a RangeError 500', async () => {
    const deep = '['.repeat(10_000) + '1' + ']'.repeat(10_000);
    const raw = `{"req_id":"deep","modality":"image","mm_items":["x"],"num_parts":${deep},"part_idx":0}`;
    for (const dp of ['encode', 'wait_metadata', 'send', 'start_profile']) {
      const r = await natsCall(nc, t, dp, raw);
      expect(r.err).toMatchObject({ code: 400, message: 'request nests deeper than 32 levels' });
    }
    for (const path of ['/encode', '/send', '/scheduler_receive_meta_data', '/start_profile']) {
      const h = await request(t.httpUrl)
        .post(path)
        .set('content-type', 'application/json')
        .send(raw);
      expect([path, h.status, h.body.message]).toEqual([
        path,
        400,
        'request nests deeper than 32 levels',
      ]);
    }
  });

  it('nats-isdisposed: bare-JSON replies are {id, response} or {id, err}; Nest envelopes keep isDisposed', async () => {
    const subject = `${t.config.nats.subjectPrefix}.v1.has_metadata`;
    const bare = (await nc.request(subject, JSON.stringify({ req_id: 'x' }))).json<object>();
    expect(Object.keys(bare).sort()).toEqual(['id', 'response']);
    const bareErr = (await nc.request(subject, JSON.stringify({}))).json<object>();
    expect(Object.keys(bareErr).sort()).toEqual(['err', 'id']);
    const envelope = (
      await nc.request(
        subject,
        JSON.stringify({ pattern: 'has_metadata', data: { req_id: 'x' }, id: 'nest-1' }),
      )
    ).json<Record<string, unknown>>();
    expect(envelope).toMatchObject({ id: 'nest-1', isDisposed: true });
  });

  it('admin-workers-404: GET /admin/workers lists the one worker until DP lands', async () => {
    const r = await request(t.httpUrl).get('/admin/workers');
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      dp_size: 1,
      workers: [
        {
          dp_rank: 0,
          pid: process.pid,
          alive: true,
          pending: 0,
          staged_bytes: 0,
          restarts: 0,
          last_exit_code: null,
          // Its thread ids (admin.e2e-spec.ts checks them against /proc).
          threads: {
            main: process.pid,
            preprocessing: expect.any(Array) as unknown,
            inference: expect.any(Array) as unknown,
          },
        },
      ],
    });
  });

  describe('send-after-caller-left', () => {
    let server: Server;
    let port: number;
    const sockets: Socket[] = [];
    let received = 0;
    beforeAll(async () => {
      // A receiver that reads every frame and never acks.
      server = createServer((s) => {
        sockets.push(s);
        s.on('data', (b) => (received += b.length));
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      port = (server.address() as { port: number }).port;
    });
    afterAll(async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    });

    const postSend = (reqId: string) => {
      const req = httpRequest(`${t.httpUrl}/send`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
      });
      req.on('error', () => undefined);
      req.end(JSON.stringify({ req_id: reqId, prefill_host: '127.0.0.1', embedding_port: port }));
      return req;
    };

    it('an HTTP /send whose caller disconnects frees the receiver socket at once, not at the 180 s deadline', async () => {
      const png = dataUri(await image(56, 56), 'image/png');
      expectOk(await natsCall(nc, t, 'encode', encodeBody('gone', [png])));
      const sender = t.app.get<EmbeddingTransport, TcpEmbeddingSender>(EmbeddingTransport);
      const req = postSend('gone');
      expect(await waitFor(() => received > 0)).toBe(true);
      expect(sender.openConnections).toBe(1);
      req.destroy();
      expect(await waitFor(() => sender.openConnections === 0, 3000)).toBe(true);
      expect(await waitFor(() => sockets.every((s) => s.closed || s.destroyed), 3000)).toBe(true);
      const status = await natsCall(nc, t, 'send_status', { req_id: 'gone' });
      expect(status.response).toMatchObject({
        state: 'staged',
        destinations: [expect.objectContaining({ status: 'failed' })],
      });
    });

    it('a delivery shared with a NATS caller goes on when the HTTP caller leaves', async () => {
      const png = dataUri(await image(56, 56), 'image/png');
      expectOk(await natsCall(nc, t, 'encode', encodeBody('shared', [png])));
      const sender = t.app.get<EmbeddingTransport, TcpEmbeddingSender>(EmbeddingTransport);
      const ledger = new CallLedger();
      const viaNats = ledger.nats('send', 1500, () =>
        natsCall(
          nc,
          t,
          'send',
          { req_id: 'shared', prefill_host: '127.0.0.1', embedding_port: port, timeout_ms: 1500 },
          { timeout: 5000 },
        ),
      );
      const before = received;
      expect(await waitFor(() => received > before)).toBe(true);
      const delivery = t.app.get(DeliveryService);
      const gone = delivery.callerStats.callersGone;
      const req = postSend('shared');
      // The HTTP caller joined the delivery (it shares the NATS caller's flight) ...
      await waitFor(() => delivery.callerStats.callersWaiting === 1);
      req.destroy();
      // ... and left it: answered caller_gone, while the connection stays for the NATS caller.
      await waitFor(() => delivery.callerStats.callersGone > gone);
      expect(sender.openConnections).toBe(1);
      // The NATS caller still gets its own answer: the receiver never acks, so its deadline.
      const answer = await viaNats;
      expect(answer?.err).toMatchObject({ code: 500 });
      expect(delivery.callerStats.callersWaiting).toBe(0);
      // The failed send kept the embedding for a retry: still staged, not gone.
      const kept = await natsCall(nc, t, 'send_status', { req_id: 'shared' });
      await natsCall(nc, t, 'release', { req_id: 'shared' });
      recordFault('receiver-never-acks', {
        fault: 'a receiver that reads every frame and never acks (send with timeout_ms 1500)',
        ledger,
        silentlyLost: kept.response?.state === 'staged' ? 0 : 1,
        leftBehind: await leftBehind(t.httpUrl, ['shared']),
      });
    });
  });
});

// Its own app with a small limit: one app at a time per process (metrics are global).
it('http-body-limit: one byte over EPD_HTTP_MAX_BODY_BYTES is 413 naming the limit and the variable', async () => {
  const limit = 200_000;
  const small = await startTestApp({ EPD_HTTP_MAX_BODY_BYTES: String(limit) });
  try {
    const pad = (n: number) => JSON.stringify({ req_id: 'x', pad: 'a'.repeat(n) });
    const base = pad(0).length;
    const atLimit = await request(small.httpUrl)
      .post('/encode')
      .set('content-type', 'application/json')
      .send(pad(limit - base));
    // Parsed, then refused by validation: the limit itself is allowed.
    expect(atLimit.status).toBe(400);
    expect(atLimit.body.message).toBe('missing or invalid modality');
    const over = await request(small.httpUrl)
      .post('/encode')
      .set('content-type', 'application/json')
      .send(pad(limit - base + 1));
    expect(over.status).toBe(413);
    expect(over.body).toEqual({
      status: 'error',
      code: 413,
      type: 'payload_too_large',
      message: `request payload of ${limit + 1} bytes exceeds the limit of ${limit} bytes (EPD_HTTP_MAX_BODY_BYTES)`,
      req_id: null,
    });
    const bad = await request(small.httpUrl)
      .post('/encode')
      .set('content-type', 'application/json')
      .send('{"req_id":');
    expect(bad.status).toBe(400);
    expect(bad.body.message).toMatch(/^request body is not valid JSON/);
  } finally {
    await small.close();
  }
});
