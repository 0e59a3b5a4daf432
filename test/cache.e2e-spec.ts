import { createHash } from 'node:crypto';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import request from 'supertest';
import type { CacheStats } from '../src/cache/embedding-cache';
import { ReferenceReceiver } from '../src/transfer/reference-receiver';
import { sharedNatsUrl, startTestApp, type TestApp } from './support/app';
import { encodeBody, natsCall, waitFor, type Reply } from './support/calls';
import { dataUri, image } from './support/media';

const TTL_MS = 8000;
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

describe('embedding cache keyed by content (e2e, one process)', () => {
  let t: TestApp;
  let nc: NatsConnection;
  let rx: ReferenceReceiver;
  const frames = new Map<string, Buffer>();
  const img: string[] = [];
  let seq = 0;
  const id = (tag: string) => `${tag}-${++seq}`;

  const encoded = new Set<string>();
  const encode = (reqId: string, items: unknown[], extra: object = {}) => {
    encoded.add(reqId);
    return natsCall(
      nc,
      t,
      'encode',
      { ...encodeBody(reqId, items), ...extra },
      { timeout: 30_000 },
    );
  };
  const send = (reqId: string) =>
    natsCall(nc, t, 'send', { req_id: reqId, prefill_host: '127.0.0.1', embedding_port: rx.port });
  const forwards = async () =>
    ((await request(t.httpUrl).get('/admin/encoder')).body as { batches: number }).batches;
  const cache = async () => (await request(t.httpUrl).get('/admin/cache')).body as CacheStats;
  const received = async (reqId: string) => {
    expect((await send(reqId)).err).toBeUndefined();
    return frames.get(reqId)!;
  };

  beforeAll(async () => {
    // Room for three 448-class images' embeddings (float32): eviction is exercised below.
    t = await startTestApp({
      EPD_CACHE_MAX_BYTES: String(3 * 1024 * 1024),
      // Short, so that a request nobody releases is seen to drain by its TTL.
      EPD_SEND_TIMEOUT_MS: String(TTL_MS),
      // Ten cold requests at once are the experiment here, not a load to shed: this app
      // shares the test runner's event loop, and a CI run saw one shed 503 `overloaded`
      // when that loop stalled past 250 ms (overload.e2e-spec.ts covers shedding).
      EPD_OVERLOAD_QUEUE_MS: '0',
    });
    nc = await connect({ servers: sharedNatsUrl() });
    rx = await ReferenceReceiver.start({
      onFrame: ({ header, data }) => void frames.set(header.req_id, Buffer.from(data)),
    });
    for (let i = 0; i < 6; i++) {
      img.push(
        dataUri(await image(448, 448, 'png', { r: 40 * i, g: 200 - 30 * i, b: 7 }), 'image/png'),
      );
    }
  });

  afterAll(async () => {
    await rx.close();
    await nc.close();
    await t.close();
  });

  it('serves the second encode of an image from the cache: no forward, the same bytes', async () => {
    const [a, b] = [id('first'), id('again')];
    const before = await forwards();
    const first = await encode(a, [img[0]]);
    expect(first.response?.timings).toMatchObject({ cache_hits: 0, cache_joins: 0 });
    expect(await forwards()).toBe(before + 1);
    const second = await encode(b, [img[0]]);
    expect(second.response?.timings).toMatchObject({ cache_hits: 1, batch_size: 0 });
    expect(await forwards()).toBe(before + 1);
    expect(second.response).toMatchObject({
      embedding_len: first.response?.embedding_len,
      embedding_size: first.response?.embedding_size,
    });
    expect(sha(await received(b))).toBe(sha(await received(a)));
    expect((await cache()).top[0]).toMatchObject({ hits: 1 });
  });

  it('encodes only the missed items of a request, and stages every item in order', async () => {
    const warm = id('warm');
    await encode(warm, [img[1]]);
    const before = await forwards();
    const mixed = id('mixed');
    const r = await encode(mixed, [img[2], img[1], img[3]]);
    expect(r.response?.timings).toMatchObject({ cache_hits: 1 });
    expect(await forwards()).toBe(before + 1);
    // The same items alone (all hits now): their bytes, concatenated in order, are the mixed one's.
    const alone = [id('a2'), id('a1'), id('a3')];
    await encode(alone[0]!, [img[2]]);
    await encode(alone[1]!, [img[1]]);
    await encode(alone[2]!, [img[3]]);
    expect(await forwards()).toBe(before + 1);
    const parts = await Promise.all(alone.map(received));
    expect(sha(await received(mixed))).toBe(sha(Buffer.concat(parts)));
  });

  it('runs one forward for ten concurrent requests of one cold image (single flight)', async () => {
    const before = await forwards();
    const cold = dataUri(await image(448, 448, 'png', { r: 1, g: 99, b: 199 }), 'image/png');
    const ids = Array.from({ length: 10 }, () => id('flight'));
    const replies: Reply[] = await Promise.all(ids.map((r) => encode(r, [cold])));
    for (const r of replies) expect(r.err).toBeUndefined();
    expect(await forwards()).toBe(before + 1);
    const joins = replies.filter((r) => r.response?.timings?.cache_joins === 1).length;
    const hits = replies.filter((r) => r.response?.timings?.cache_hits === 1).length;
    expect(joins + hits).toBe(9);
    const bytes = new Set((await Promise.all(ids.map(received))).map(sha));
    expect(bytes.size).toBe(1);
    expect((await cache()).in_flight).toBe(0);
  });

  it('keeps a video (a list of frames) as one entry', async () => {
    await request(t.httpUrl).delete('/admin/cache');
    const frames = [img[0], img[1], img[2], img[3]];
    const first = await encode(id('video'), frames, { modality: 'video' });
    const again = await encode(id('video'), frames, { modality: 'video' });
    expect(first.response?.timings).toMatchObject({ cache_hits: 0 });
    expect(again.response?.timings).toMatchObject({ cache_hits: 1, batch_size: 0 });
    expect(again.response?.embedding_len).toBe(first.response?.embedding_len);
    // A frame sent as an image is another entry (the modality is in the key).
    const asImage = await encode(id('frame'), [img[0]]);
    expect(asImage.response?.timings).toMatchObject({ cache_hits: 0 });
  });

  it('ignores the caller hashes as a key: a forged hash serves nothing', async () => {
    const before = await forwards();
    const r = await encode(id('forged'), [img[4]], { hashes: ['deadbeef'] });
    expect(r.response?.timings).toMatchObject({ cache_hits: 0 });
    const other = await encode(id('forged2'), [img[5]], { hashes: ['deadbeef'] });
    expect(other.response?.timings).toMatchObject({ cache_hits: 0 });
    expect(await forwards()).toBe(before + 2);
  });

  it('evicts and purges while sends are in flight: no send fails, and staging drains by release and TTL', async () => {
    const staged = [id('ev'), id('ev'), id('ev'), id('ev')];
    for (const [i, r] of staged.entries()) await encode(r, [img[i]]);
    const view = await cache();
    expect(view.bytes).toBeLessThanOrEqual(view.max_bytes);
    expect(view.evictions).toBeGreaterThan(0);
    // Sends of every staged request, while new encodes evict their entries and a purge runs.
    const sends = staged.map((r) => received(r));
    const evicting = [encode(id('ev2'), [img[4]]), encode(id('ev2'), [img[5]])];
    const purged = request(t.httpUrl).delete('/admin/cache');
    for (const frame of await Promise.all(sends)) expect(frame.length).toBeGreaterThan(0);
    for (const r of await Promise.all(evicting)) expect(r.err).toBeUndefined();
    expect((await purged).body).toMatchObject({ purged: expect.any(Number) });
    expect((await cache()).entries).toBe(0);
    // Every staged request still delivers its rows after the purge.
    for (const r of staged) expect((await received(r)).length).toBeGreaterThan(0);
    // Released, or (the last one) left to its TTL: staging drains to zero either way.
    const [ttlOnly] = [...encoded].slice(-1);
    for (const r of encoded) if (r !== ttlOnly) await natsCall(nc, t, 'release', { req_id: r });
    expect(
      await waitFor(
        async () => {
          const admin = (await request(t.httpUrl).get('/admin/requests')).body as {
            staging: { usedBytes: number };
          };
          return admin.staging.usedBytes === 0;
        },
        TTL_MS + 5000,
        100,
      ),
    ).toBe(true);
  }, 30_000);
});
