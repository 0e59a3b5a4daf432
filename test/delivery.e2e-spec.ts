import { expectOk } from './support/wait';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import request from 'supertest';
import { natsCall, waitFor } from './support/calls';
import { toFloat16Bits } from '../src/encoder/backend/half-precision';
import type { FrameHeader } from '../src/transfer/frame';
import { ReferenceReceiver } from '../src/transfer/reference-receiver';
import { sharedNatsUrl, startTestApp, type TestApp } from './support/app';
import { dataUri, image } from './support/media';
import { recordFault } from './support/fault-report';
import { CallLedger, leftBehind } from './support/ledger';

type Reply = { response?: Record<string, unknown>; err?: Record<string, unknown> };
interface Got {
  header: FrameHeader;
  sha: string;
  from: string;
}

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

async function receiver(got: Got[] = [], opts: { fail?: string } = {}) {
  return ReferenceReceiver.start({
    onFrame: ({ header, data, from }) => {
      if (opts.fail) throw new Error(opts.fail);
      got.push({ header, sha: sha(data), from });
    },
  });
}

describe('data plane and request lifecycle (e2e)', () => {
  let t: TestApp;
  let nc: NatsConnection;
  let png: Buffer;
  let item: string;
  const receivers: ReferenceReceiver[] = [];

  const call = (dp: string, data: unknown) =>
    natsCall(nc, t, dp, data, { timeout: 60_000 }) as Promise<Reply>;
  const encode = (reqId: string, extra: object = {}) =>
    call('encode', {
      req_id: reqId,
      modality: 'image',
      mm_items: [item],
      num_parts: 1,
      part_idx: 0,
      ...extra,
    });
  const send = (reqId: string, rx: ReferenceReceiver, extra: object = {}) =>
    call('send', { req_id: reqId, prefill_host: '127.0.0.1', embedding_port: rx.port, ...extra });
  const requests = async () =>
    (await request(t.httpUrl).get('/admin/requests')).body as {
      staging: { usedBytes: number; states: number; startWaiters: number };
      requests: { req_id: string; destinations: { endpoint: string; status: string }[] }[];
    };
  const newReceiver = async (got: Got[] = [], opts: { fail?: string } = {}) => {
    const rx = await receiver(got, opts);
    receivers.push(rx);
    return rx;
  };

  beforeAll(async () => {
    t = await startTestApp({ EPD_SEND_TIMEOUT_MS: '60000' });
    nc = await connect({ servers: sharedNatsUrl() });
    png = await image(112, 84, 'png', { r: 200, g: 30, b: 90 });
    item = dataUri(png, 'image/png');
  });
  afterAll(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    await nc.drain();
    await t.close();
  });

  it('delivers the exact embedding: bytes match a bare ORT forward of the same input, header matches the metadata', async () => {
    const got: Got[] = [];
    const rx = await newReceiver(got);
    const enc = await encode('exact');
    expect(enc.response).toMatchObject({ embedding_len: 12, embedding_dim: 1024 });
    const sent = await send('exact', rx, { session_id: 'sess-1', buffer_address: 4096 });
    expect(sent.response).toEqual({ req_id: 'exact', bytes: 12 * 1024 * 4, acked: true });

    // The expected bytes, computed independently of the service by the epd-embed CLI:
    // same preprocessing, one bare ORT forward of the same model.
    const file = join(mkdtempSync(join(tmpdir(), 'epd-embed-')), 'in.png');
    writeFileSync(file, png);
    const expected = JSON.parse(
      execFileSync(process.execPath, ['dist/cli/embed.js', file]).toString(),
    ) as { shape: number[]; sha256: string };
    expect(expected.shape).toEqual([12, 1024]);

    expect(got).toHaveLength(1);
    expect(got[0]!.sha).toBe(expected.sha256);
    expect(got[0]!.header).toMatchObject({
      req_id: 'exact',
      part_idx: 0,
      num_parts: 1,
      shape: [12, 1024],
      dtype: 'float32',
      byte_length: 12 * 1024 * 4,
      session_id: 'sess-1',
      buffer_address: 4096,
    });
    const meta = await call('wait_metadata', { req_id: 'exact' });
    expect(meta.response).toMatchObject({
      embedding_len: 12,
      embedding_dim: 1024,
      embedding_size: 12 * 1024 * 4,
    });
    // No receive_count: kept until TTL or release (the documented policy).
    expect((await requests()).requests.map((r) => r.req_id)).toContain('exact');
    await call('release', { req_id: 'exact' });
  });

  it('fans out with receive_count=3: a retry counts once, release follows the third distinct ack, a fourth send is refused', async () => {
    const got: Got[] = [];
    const [a, b, c, d] = [
      await newReceiver(got),
      await newReceiver(got),
      await newReceiver(got),
      await newReceiver(got),
    ];
    await encode('fan');
    expect((await send('fan', a, { receive_count: 3 })).response).toMatchObject({ acked: true });
    expect((await send('fan', a, { receive_count: 3 })).response).toMatchObject({ acked: true }); // retry
    const status = await call('send_status', { req_id: 'fan' });
    expect(status.response).toMatchObject({ receive_count: 3, acked: 1, state: 'staged' });
    await send('fan', b, { receive_count: 3 });
    expect((await requests()).requests.map((r) => r.req_id)).toContain('fan');
    await send('fan', c, { receive_count: 3 });
    expect((await requests()).requests.map((r) => r.req_id)).not.toContain('fan');
    const fourth = await send('fan', d, { receive_count: 3 });
    expect(fourth.err).toEqual({
      status: 'error',
      code: 500,
      type: 'already_released',
      message: 'no staged embedding for /send req_id=fan (already released)',
      req_id: 'fan',
    });
    expect(new Set(got.filter((g) => g.header.req_id === 'fan').map((g) => g.sha)).size).toBe(1);
    expect((await requests()).staging.usedBytes).toBe(0);
  });

  it('pushes to destinations registered before the encode, then releases; the encode reply reports them', async () => {
    const got: Got[] = [];
    const rxs = [await newReceiver(got), await newReceiver(got), await newReceiver(got)];
    const registrations = rxs.map((rx) =>
      call('register_destinations', {
        req_id: 'reg',
        receive_count: 3,
        receive_url: `tcp://127.0.0.1:${rx.port}`,
      }),
    );
    // The registrations wait for the encode to start.
    expect(await waitFor(async () => (await requests()).staging.startWaiters === 3)).toBe(true);
    const enc = await encode('reg');
    for (const r of await Promise.all(registrations)) expect(r).toMatchObject({ response: null });
    const dests = (enc.response as { destinations: { status: string }[] }).destinations;
    expect(dests).toHaveLength(3);
    expect(dests.every((d) => d.status === 'acked')).toBe(true);
    expect(got.filter((g) => g.header.req_id === 'reg')).toHaveLength(3);
    expect((await requests()).requests.map((r) => r.req_id)).not.toContain('reg');
    const late = await call('register_destinations', {
      req_id: 'reg',
      receive_count: 3,
      receive_url: `127.0.0.1:${rxs[0]!.port}`,
    });
    expect(late.err).toMatchObject({ code: 400, message: 'Encoder request is not active: reg' });
  });

  it('answers 504 when fewer than receive_count destinations register in time, keeping the embedding for the late one', async () => {
    const got: Got[] = [];
    const [first, second] = [await newReceiver(got), await newReceiver(got)];
    const reg1 = call('register_destinations', {
      req_id: 'short',
      receive_count: 2,
      receive_url: `127.0.0.1:${first.port}`,
    });
    expect(await waitFor(async () => (await requests()).staging.startWaiters === 1)).toBe(true);
    const enc = await encode('short', { timeout_ms: 1500 });
    expect((await reg1).response).toBeNull();
    expect(enc.err).toMatchObject({
      code: 504,
      message:
        'delivery of req_id=short incomplete: 1 of 2 destinations registered before the deadline',
    });
    expect(got.map((g) => g.header.req_id)).toEqual(['short']); // the registered one got it
    await call('register_destinations', {
      req_id: 'short',
      receive_count: 2,
      receive_url: `127.0.0.1:${second.port}`,
    });
    await waitFor(async () => !(await requests()).requests.some((r) => r.req_id === 'short'));
    expect(got.map((g) => g.header.req_id)).toEqual(['short', 'short']);
    expect((await requests()).requests.map((r) => r.req_id)).not.toContain('short');
  });

  it('rejects an inconsistent receive_count and a bad receive_url, and times out a registration whose encode never starts', async () => {
    const rx = await newReceiver();
    await encode('incons');
    await call('register_destinations', {
      req_id: 'incons',
      receive_count: 2,
      receive_url: `127.0.0.1:${rx.port}`,
    });
    const bad = await call('register_destinations', {
      req_id: 'incons',
      receive_count: 3,
      receive_url: `127.0.0.1:${rx.port}`,
    });
    expect(bad.err).toMatchObject({
      code: 400,
      message: 'Inconsistent receive_count for req_id=incons: registered 2, got 3',
    });
    const url = await call('register_destinations', {
      req_id: 'incons',
      receive_count: 2,
      receive_url: 'not a url',
    });
    expect(url.err).toMatchObject({
      code: 400,
      message: expect.stringContaining('invalid receive_url not a url'),
    });
    await call('release', { req_id: 'incons' });
    const never = await call('register_destinations', {
      req_id: 'never',
      receive_count: 1,
      receive_url: `127.0.0.1:${rx.port}`,
      timeout_ms: 200,
    });
    expect(never.err).toMatchObject({
      code: 504,
      message: 'Timed out waiting for encoder request to start: never',
    });
    expect((await requests()).staging.startWaiters).toBe(0);
  });

  it('fails a send clearly when the receiver nacks or closes, keeps the embedding for a retry, and leaves no waiter hanging', async () => {
    const nack = await newReceiver([], { fail: 'no landing buffer' });
    const closer: Server = createServer((s) => s.once('data', () => s.destroy()));
    await new Promise<void>((r) => closer.listen(0, '127.0.0.1', r));
    try {
      await encode('flaky');
      const ledger = new CallLedger();
      ledger.markFault();
      const r1 = await ledger.nats('send', 60_000, () => send('flaky', nack));
      expect(r1?.err).toMatchObject({
        code: 500,
        message: `send of req_id=flaky to 127.0.0.1:${nack.port} failed: receiver 127.0.0.1:${nack.port} refused req_id=flaky: no landing buffer`,
      });
      const port = (closer.address() as { port: number }).port;
      const r2 = await ledger.nats('send', 60_000, () =>
        call('send', { req_id: 'flaky', prefill_host: '127.0.0.1', embedding_port: port }),
      );
      expect(r2?.err).toMatchObject({
        code: 500,
        message: expect.stringContaining('closed the connection before acking'),
      });
      const status = (await call('send_status', { req_id: 'flaky' })).response as {
        destinations: { status: string; error: string }[];
      };
      expect(status.destinations.map((d) => d.status)).toEqual(['failed', 'failed']);
      const got: Got[] = [];
      const good = await newReceiver(got);
      const r3 = await ledger.nats('send', 60_000, () => send('flaky', good));
      expect(r3?.response).toMatchObject({ acked: true });
      await call('release', { req_id: 'flaky' });
      expect(await t.registry.stats()).toMatchObject({ waiters: 0 });
      const framesAtGood = got.filter((g) => g.header.req_id === 'flaky').length;
      recordFault('receiver-nack-close', {
        fault:
          'a receiver that refuses the frame, then one that closes mid-frame; a retry to a good one',
        ledger,
        // The retry was acked: the embedding survived both failures only if its frame arrived.
        silentlyLost: r3?.response?.acked === true && framesAtGood === 0 ? 1 : 0,
        leftBehind: await leftBehind(t.httpUrl, ['flaky']),
      });
    } finally {
      closer.close();
    }
  });

  it('pushes to prefill_host:embedding_port named in the encode (tokenizer mode) and releases after the ack', async () => {
    const got: Got[] = [];
    const rx = await newReceiver(got);
    const enc = await encode('tok', { prefill_host: '127.0.0.1', embedding_port: rx.port });
    expect(enc.response).toMatchObject({
      destinations: [{ endpoint: `127.0.0.1:${rx.port}`, status: 'acked', source: 'encode' }],
    });
    expect(got.map((g) => g.header.req_id)).toEqual(['tok']);
    expect((await requests()).requests.map((r) => r.req_id)).not.toContain('tok');

    const dead = await encode('tok-dead', { prefill_host: '127.0.0.1', embedding_port: 1 });
    expect(dead.err).toMatchObject({
      code: 500,
      message:
        'send of req_id=tok-dead to 127.0.0.1:1 failed: could not connect to 127.0.0.1:1: connect ECONNREFUSED 127.0.0.1:1',
    });
    // The embedding stays staged for a retry, and its metadata is intact (not an {error}).
    expect((await call('wait_metadata', { req_id: 'tok-dead' })).response).toMatchObject({
      embedding_len: 12,
    });
    await call('release', { req_id: 'tok-dead' });
  });

  it('releases idempotently; staged bytes and the gauge return to zero', async () => {
    await encode('twice');
    expect((await request(t.httpUrl).post('/admin/requests/twice/release')).body).toEqual({
      req_id: 'twice',
      outcome: 'released',
    });
    expect((await request(t.httpUrl).post('/admin/requests/twice/release')).body).toEqual({
      req_id: 'twice',
      outcome: 'tombstoned',
    });
    expect((await request(t.httpUrl).post('/admin/requests/twice/release')).body).toEqual({
      req_id: 'twice',
      outcome: 'already-tombstoned',
    });
    const after = await requests();
    expect(after.staging).toMatchObject({ usedBytes: 0, states: 0 });
    const gauge = (await request(t.httpUrl).get('/metrics')).text;
    expect(gauge).toMatch(/^epd_encoder_staged_bytes 0$/m);
  });
});

describe('TTL expiry (e2e)', () => {
  it('releases an unsent embedding after EPD_SEND_TIMEOUT_MS; staged bytes return to zero', async () => {
    const short = await startTestApp({ EPD_SEND_TIMEOUT_MS: '400' });
    const nc = await connect({ servers: sharedNatsUrl() });
    try {
      const item = dataUri(await image(112, 84), 'image/png');
      const r = await nc.request(
        `${short.config.nats.subjectPrefix}.v1.encode`,
        JSON.stringify({
          req_id: 'ttl',
          modality: 'image',
          mm_items: [item],
          num_parts: 1,
          part_idx: 0,
        }),
        { timeout: 30_000 },
      );
      expectOk(r.json<Reply>());
      const before = (await request(short.httpUrl).get('/admin/requests')).body as {
        staging: { usedBytes: number };
      };
      expect(before.staging.usedBytes).toBe(12 * 1024 * 4);
      let body: { staging: { usedBytes: number; states: number } } | undefined;
      await waitFor(
        async () => {
          body = (await request(short.httpUrl).get('/admin/requests')).body as typeof body;
          return body!.staging.states === 0;
        },
        5000,
        50,
      );
      expect(body!.staging).toMatchObject({ usedBytes: 0, states: 0 });
      const late = await nc.request(
        `${short.config.nats.subjectPrefix}.v1.send`,
        JSON.stringify({ req_id: 'ttl', prefill_host: '127.0.0.1', embedding_port: 9 }),
        { timeout: 5000 },
      );
      expect(late.json<Reply>().err).toMatchObject({
        code: 500,
        message: 'no staged embedding for /send req_id=ttl (already released)',
      });
    } finally {
      await nc.drain();
      await short.close();
    }
  });
});

describe('float16 staging (e2e)', () => {
  it('halves embedding_size and sends the float32 embedding rounded to float16, bit for bit', async () => {
    const t = await startTestApp({ EPD_STAGING_DTYPE: 'float16' });
    const nc = await connect({ servers: sharedNatsUrl() });
    const got: FrameHeader[] = [];
    const bytes: Buffer[] = [];
    const rx = await ReferenceReceiver.start({
      onFrame: ({ header, data }) => {
        got.push(header);
        bytes.push(Buffer.from(data));
      },
    });
    try {
      const subject = (dp: string) => `${t.config.nats.subjectPrefix}.v1.${dp}`;
      const png = await image(112, 84);
      const item = dataUri(png, 'image/png');
      const enc = await nc.request(
        subject('encode'),
        JSON.stringify({
          req_id: 'f16',
          modality: 'image',
          mm_items: [item],
          num_parts: 1,
          part_idx: 0,
        }),
        { timeout: 30_000 },
      );
      expect(enc.json<Reply>().response).toMatchObject({
        embedding_len: 12,
        embedding_size: 12 * 1024 * 2,
      });
      const sent = await nc.request(
        subject('send'),
        JSON.stringify({
          req_id: 'f16',
          prefill_host: '127.0.0.1',
          embedding_port: rx.port,
          receive_count: 1,
        }),
        { timeout: 30_000 },
      );
      expect(sent.json<Reply>().response).toEqual({
        req_id: 'f16',
        bytes: 12 * 1024 * 2,
        acked: true,
      });
      expect(got).toEqual([
        expect.objectContaining({
          dtype: 'float16',
          shape: [12, 1024],
          byte_length: 12 * 1024 * 2,
        }),
      ]);
      // The float32 embedding of a bare ORT forward (epd-embed), rounded by the scalar
      // reference: the staged halves must be exactly these.
      const dir = mkdtempSync(join(tmpdir(), 'epd-f16-'));
      writeFileSync(join(dir, 'in.png'), png);
      execFileSync(process.execPath, [
        'dist/cli/embed.js',
        join(dir, 'in.png'),
        '--npy',
        join(dir, 'f32.npy'),
      ]);
      const npy = readFileSync(join(dir, 'f32.npy'));
      const f32 = new Float32Array(npy.buffer.slice(npy.byteOffset + 10 + npy.readUInt16LE(8)));
      const halves = new Uint16Array(bytes[0]!.buffer.slice(bytes[0]!.byteOffset));
      expect(f32).toHaveLength(12 * 1024);
      expect([...halves]).toEqual([...f32].map(toFloat16Bits));
    } finally {
      await rx.close();
      await nc.drain();
      await t.close();
    }
  });
});

describe('send during the forward (e2e, slow model)', () => {
  it('waits for the embedding, then delivers it', async () => {
    const t = await startTestApp({ EPD_MODEL_PATH: process.env.EPD_TEST_SLOW_MODEL! });
    const nc = await connect({ servers: sharedNatsUrl() });
    const got: { req_id: string; bytes: number }[] = [];
    const rx = await ReferenceReceiver.start({
      onFrame: ({ header, data }) => void got.push({ req_id: header.req_id, bytes: data.length }),
    });
    try {
      const big = dataUri(await image(1024, 768, 'jpeg'), 'image/jpeg');
      const subject = (dp: string) => `${t.config.nats.subjectPrefix}.v1.${dp}`;
      const encoding = nc.request(
        subject('encode'),
        JSON.stringify({
          req_id: 'mid',
          modality: 'image',
          mm_items: [big],
          num_parts: 1,
          part_idx: 0,
        }),
        { timeout: 60_000 },
      );
      await nc.request(subject('wait_metadata'), JSON.stringify({ req_id: 'mid' }), {
        timeout: 60_000,
      }); // forward about to run
      const sent = await nc.request(
        subject('send'),
        JSON.stringify({
          req_id: 'mid',
          prefill_host: '127.0.0.1',
          embedding_port: rx.port,
          receive_count: 1,
        }),
        { timeout: 60_000 },
      );
      expect(sent.json<Reply>().response).toEqual({
        req_id: 'mid',
        bytes: 999 * 4096 * 4,
        acked: true,
      });
      expect((await encoding).json<Reply>().response).toMatchObject({
        embedding_len: 999,
        embedding_dim: 4096,
      });
      expect(got).toEqual([{ req_id: 'mid', bytes: 999 * 4096 * 4 }]);
    } finally {
      await rx.close();
      await nc.drain();
      await t.close();
    }
  });
});
