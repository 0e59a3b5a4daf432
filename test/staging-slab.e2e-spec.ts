import { expectOk } from './support/wait';
import { createHash, randomBytes } from 'node:crypto';
import { connect as tcpConnect, createServer, type Server, type Socket } from 'node:net';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import sharp from 'sharp';
import request from 'supertest';
import { ReferenceReceiver } from '../src/transfer/reference-receiver';
import { sharedNatsUrl, startTestApp, type TestApp } from './support/app';
import { natsCall, waitFor, type Reply } from './support/calls';
import { drained } from './support/drained';

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

/** Four noisy 1024×768 photos: 4 × 999 tokens × 1024 × 4 B = 16,367,616 B of float32. */
const FOUR_PHOTOS_BYTES = 4 * 999 * 1024 * 4;

const noisy = (w: number, h: number) =>
  sharp(randomBytes(w * h * 3), { raw: { width: w, height: h, channels: 3 } })
    .png({ compressionLevel: 1 })
    .toBuffer()
    .then((b) => `data:image/png;base64,${b.toString('base64')}`);

/**
 * A TCP endpoint that accepts and does not read until `open()`, then pipes each held
 * connection to `target`: a receiver whose socket buffers fill, so that a send's payload
 * stays partly unwritten in the sender.
 */
async function stalledProxy(target: () => number) {
  const held: Socket[] = [];
  const server: Server = createServer((s) => {
    s.pause();
    held.push(s);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as { port: number }).port,
    connections: () => held.length,
    open() {
      for (const s of held) {
        const up = tcpConnect(target(), '127.0.0.1');
        s.pipe(up);
        up.pipe(s);
        s.resume();
      }
    },
    close: () => {
      held.forEach((s) => s.destroy());
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/**
 * slab-slot-recycled-under-a-write: a staged embedding lives in a slot of the staging
 * slab (EPD_STAGING_SLAB_BYTES), and its slot goes back to the slab when the request ends.
 * A send whose HTTP caller went away is answered at once, and its request may then be
 * released, while the socket still writes the frame's payload from the slot (other frames
 * on the same connection keep it open). Had the slot been reused then, the receiver would
 * have got another request's values under this req_id. The send holds the slot until the
 * socket is done with it. Real ONNX Runtime, real sockets, a real nats-server.
 */
describe('staging slab: a slot outlives its request while a write still reads it (e2e)', () => {
  let t: TestApp;
  let nc: NatsConnection;
  let rx: ReferenceReceiver;
  const frames: { reqId: string; sha: string }[] = [];

  const call = (dp: string, data: unknown) => natsCall(nc, t, dp, data, { timeout: 120_000 });
  /** Over HTTP: four photos are more than NATS's max_payload. */
  const encode = async (reqId: string, items: string[]): Promise<Reply> => {
    const res = await request(t.httpUrl)
      .post('/encode')
      .send({ req_id: reqId, modality: 'image', mm_items: items, num_parts: 1, part_idx: 0 });
    return res.status === 200
      ? { response: res.body as Record<string, unknown> }
      : { err: res.body };
  };
  const slab = async () =>
    (
      (await request(t.httpUrl).get('/admin/requests')).body as {
        staging_slab: { capacityBytes: number; usedBytes: number; slots: number };
      }
    ).staging_slab;

  beforeAll(async () => {
    // Room for exactly one request of four photos.
    t = await startTestApp({
      EPD_STAGING_SLAB_BYTES: String(FOUR_PHOTOS_BYTES),
      EPD_SEND_TIMEOUT_MS: '120000',
    });
    nc = await connect({ servers: sharedNatsUrl() });
    rx = await ReferenceReceiver.start({
      onFrame: ({ header, data }) => void frames.push({ reqId: header.req_id, sha: sha(data) }),
    });
  });
  afterAll(async () => {
    await rx.close();
    await nc.drain();
    await t.close();
  });

  it('stages in the slab while it has room and in an ordinary buffer after, both delivered exactly', async () => {
    const photos = await Promise.all([0, 1, 2, 3].map(() => noisy(1024, 768)));
    expect((await encode('in-slab', photos)).response).toMatchObject({
      embedding_size: FOUR_PHOTOS_BYTES,
    });
    expect(await slab()).toEqual({
      capacityBytes: FOUR_PHOTOS_BYTES,
      usedBytes: FOUR_PHOTOS_BYTES,
      slots: 1,
    });
    // The same photos again: no room left, so an ordinary buffer, with the same values.
    expectOk(await encode('no-room', photos));
    expect((await slab()).slots).toBe(1);
    for (const reqId of ['in-slab', 'no-room'])
      expect(
        (await call('send', { req_id: reqId, prefill_host: '127.0.0.1', embedding_port: rx.port }))
          .response,
      ).toBeDefined();
    const got = (id: string) => frames.find((f) => f.reqId === id)!.sha;
    expect(got('in-slab')).toBe(got('no-room'));
    for (const reqId of ['in-slab', 'no-room']) await call('release', { req_id: reqId });
    expect(await slab()).toMatchObject({ usedBytes: 0, slots: 0 });
  }, 120_000);

  it('slab-slot-recycled-under-a-write: an abandoned send keeps its slot until the socket is done, and the receiver gets its own values', async () => {
    frames.length = 0;
    const proxy = await stalledProxy(() => rx.port);
    try {
      const [a, c] = await Promise.all([
        Promise.all([0, 1, 2, 3].map(() => noisy(1024, 768))),
        Promise.all([0, 1, 2, 3].map(() => noisy(1024, 768))),
      ]);
      expectOk(await encode('a', a)); // the slab's one slot
      expectOk(await encode('b', [await noisy(448, 448)])); // no room
      // A's true values, from a receiver that reads at once.
      await call('send', { req_id: 'a', prefill_host: '127.0.0.1', embedding_port: rx.port });
      const truth = frames.find((f) => f.reqId === 'a')!.sha;

      // A over HTTP to the stalled receiver, then B on the same connection over NATS.
      const http = new AbortController();
      const sendA = fetch(`${t.httpUrl}/send`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          req_id: 'a',
          prefill_host: '127.0.0.1',
          embedding_port: proxy.port,
        }),
        signal: http.signal,
      }).catch(() => 'gone');
      expect(await waitFor(() => proxy.connections() === 1, 10_000)).toBe(true);
      const sendB = call('send', {
        req_id: 'b',
        prefill_host: '127.0.0.1',
        embedding_port: proxy.port,
      });
      // Both frames queued on the one connection: B's delivery has started.
      await waitFor(
        async () =>
          (
            (await request(t.httpUrl).get('/admin/requests/b')).body as {
              destinations?: { status: string }[];
            }
          ).destinations?.some((d) => d.status === 'sending') === true,
      );
      http.abort(); // A's caller goes away: its send is answered, the connection stays for B
      expect(await sendA).toBe('gone');
      // Released while its abandoned send winds down: deferred until that send ends.
      await call('release', { req_id: 'a' });
      const listed = async () =>
        (
          (await request(t.httpUrl).get('/admin/requests')).body as {
            requests: { req_id: string }[];
          }
        ).requests;
      expect(
        await waitFor(async () => !(await listed()).some((r) => r.req_id === 'a'), 10_000),
      ).toBe(true);

      // A is released, yet its slot is still being written from: it is not handed out.
      expect(await slab()).toMatchObject({ usedBytes: FOUR_PHOTOS_BYTES, slots: 1 });
      expectOk(await encode('c', c)); // stages elsewhere
      expect(await slab()).toMatchObject({ usedBytes: FOUR_PHOTOS_BYTES, slots: 1 });

      proxy.open(); // the receiver reads: A's frame, then B's
      expectOk(await sendB);
      const viaProxy = frames.filter((f) => f.reqId === 'a');
      expect(viaProxy).toHaveLength(2); // the direct send, and the abandoned one
      expect(viaProxy[1]!.sha).toBe(truth);
      // The socket is done with A's payload: its slot is back.
      expect(await waitFor(async () => (await slab()).slots === 0, 10_000)).toBe(true);
      for (const reqId of ['b', 'c']) await call('release', { req_id: reqId });
      // Its metadata went with its (deferred) release too: nothing is left behind.
      expect(await waitFor(() => drained(t.httpUrl), 10_000, 100)).toBe(true);
    } finally {
      await proxy.close();
    }
  }, 120_000);
});
