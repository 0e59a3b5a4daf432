import { createHash } from 'node:crypto';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import request from 'supertest';
import { ReferenceReceiver } from '../src/transfer/reference-receiver';
import { sharedNatsUrl, startTestApp, type TestApp } from './support/app';
import { encodeBody, natsCall } from './support/calls';
import { dataUri, image } from './support/media';

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

/**
 * EPD_CACHE_TRUST_CLIENT_HASH=true: a caller's hashes are lookup keys within its
 * cache_namespace, so a request whose every item is known by its hash loads nothing.
 */
describe('embedding cache trusting the caller hashes (e2e)', () => {
  let t: TestApp;
  let nc: NatsConnection;
  let rx: ReferenceReceiver;
  const frames = new Map<string, Buffer>();
  let seq = 0;
  const id = (tag: string) => `${tag}-${++seq}`;
  const pngs: Buffer[] = [];
  // A URL this service may not fetch (no allowed domains): loading it is a 400.
  const unloadable = 'http://127.0.0.1:9/never-fetched.png';

  const encode = (reqId: string, items: unknown[], extra: object = {}) =>
    natsCall(nc, t, 'encode', { ...encodeBody(reqId, items), ...extra });
  const forwards = async () =>
    ((await request(t.httpUrl).get('/admin/encoder')).body as { batches: number }).batches;
  const received = async (reqId: string) => {
    const r = await natsCall(nc, t, 'send', {
      req_id: reqId,
      prefill_host: '127.0.0.1',
      embedding_port: rx.port,
    });
    expect(r.err).toBeUndefined();
    return frames.get(reqId)!;
  };

  beforeAll(async () => {
    t = await startTestApp({
      EPD_CACHE_MAX_BYTES: String(32 * 1024 * 1024),
      EPD_CACHE_TRUST_CLIENT_HASH: 'true',
    });
    nc = await connect({ servers: sharedNatsUrl() });
    rx = await ReferenceReceiver.start({
      onFrame: ({ header, data }) => void frames.set(header.req_id, Buffer.from(data)),
    });
    for (let i = 0; i < 3; i++) pngs.push(await image(448, 448, 'png', { r: 90 * i, g: 5, b: 70 }));
  });

  afterAll(async () => {
    await rx.close();
    await nc.close();
    await t.close();
  });

  it('a known content_hash in the same namespace is served without loading the media', async () => {
    const first = id('known');
    const hash = sha(pngs[0]!);
    const miss = await encode(
      first,
      [{ url: dataUri(pngs[0]!, 'image/png'), content_hash: hash }],
      {
        cache_namespace: 'tenant-a',
      },
    );
    expect(miss.response?.timings).toMatchObject({ cache_hits: 0, batch_size: 1 });
    const before = await forwards();
    const second = id('known');
    const hit = await encode(second, [{ url: unloadable, content_hash: `sha256:${hash}` }], {
      cache_namespace: 'tenant-a',
    });
    expect(hit.err).toBeUndefined();
    expect(hit.response?.timings).toMatchObject({ cache_hits: 1, batch_size: 0 });
    expect(await forwards()).toBe(before);
    expect(sha(await received(second))).toBe(sha(await received(first)));
  });

  it('another namespace does not see it: the media is loaded (and here fails to load)', async () => {
    const r = await encode(id('other-ns'), [{ url: unloadable, content_hash: sha(pngs[0]!) }], {
      cache_namespace: 'tenant-b',
    });
    expect(r.err?.code).toBe(400);
  });

  it("SGLang's hashes are keys too, and what they cost: a lying caller is served the wrong rows", async () => {
    const honest = id('sg');
    await encode(honest, [dataUri(pngs[1]!, 'image/png')], { hashes: [424242] });
    const before = await forwards();
    // Another image under the same hash, in the same (default) namespace: trusted, not checked.
    const liar = id('sg');
    const r = await encode(liar, [dataUri(pngs[2]!, 'image/png')], { hashes: [424242] });
    expect(r.response?.timings).toMatchObject({ cache_hits: 1, batch_size: 0 });
    expect(await forwards()).toBe(before);
    expect(sha(await received(liar))).toBe(sha(await received(honest)));
  });

  it('an item without a hash, or one not cached, means the whole request is loaded and checked', async () => {
    const r = await encode(id('partial'), [
      { url: dataUri(pngs[0]!, 'image/png'), content_hash: sha(pngs[0]!) },
      dataUri(pngs[2]!, 'image/png'),
    ]);
    expect(r.err).toBeUndefined();
    // A wrong content_hash is still refused whenever the media is loaded.
    const wrong = await encode(id('wrong'), [
      { url: dataUri(pngs[2]!, 'image/png'), content_hash: '0'.repeat(64) },
    ]);
    expect(wrong.err?.code).toBe(400);
  });

  it('rejects a malformed cache_namespace with a 400 that names it', async () => {
    const r = await encode(id('bad-ns'), [dataUri(pngs[0]!, 'image/png')], {
      cache_namespace: 'has space',
    });
    expect(r.err?.code).toBe(400);
    expect(r.err?.message).toMatch(/cache_namespace/);
  });
});
