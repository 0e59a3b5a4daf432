import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Clock } from '../src/common/clock';
import { CachePeer, PeerUnusable } from '../src/cache/cache-peer';
import { EmbeddingCache } from '../src/cache/embedding-cache';
import { StreamedReplies } from '../src/transport/streamed-replies';
import { sharedNatsUrl } from './support/shared-nats';

/**
 * The cache's peer fetch over a real nats-server, through StreamedReplies (transport): an
 * entry larger than one message arrives in chunks, intact; a subject nobody serves is
 * unusable at once; a flight in progress gives its token count before its rows.
 */
describe('CachePeer over StreamedReplies (e2e)', () => {
  let nc: NatsConnection;
  let replies: StreamedReplies;
  const subject = `cpeer.${process.pid}.${Date.now()}`;
  const store = new EmbeddingCache(64 * 1024 * 1024);
  const peer = new CachePeer(store, 2_000, new Clock());

  beforeAll(async () => {
    nc = await connect({ servers: sharedNatsUrl() });
    replies = new StreamedReplies(nc);
    peer.serve(replies, subject);
  });
  afterAll(async () => {
    peer.stop();
    await nc.drain();
  });

  it('an entry of several messages arrives in chunks, byte for byte', async () => {
    // Rows over two messages' worth, whatever the server's max_payload: three chunks at least.
    const dim = 1024;
    const tokens = Math.ceil((2 * replies.chunkBytes) / (dim * 2)) + 1;
    const data = new Uint16Array(tokens * dim);
    for (let i = 0; i < data.length; i++) data[i] = (i * 7919) & 0xffff;
    store.put({
      key: 'big',
      data,
      tokens,
      dim,
      grid: [[1, 32, 32]],
      bytes: data.byteLength,
      hits: 0,
    });
    expect(data.byteLength).toBeGreaterThan(2 * replies.chunkBytes);
    const planned: number[] = [];
    const got = await peer.fetch(replies, subject, 'big', Date.now() + 10_000, (t) =>
      planned.push(t),
    );
    expect(planned).toEqual([tokens]);
    expect(got).toMatchObject({ key: 'big', tokens, dim, grid: [[1, 32, 32]] });
    // Compared as bytes at once (a deep equality of 17 MB takes seconds).
    const sent = Buffer.from(data.buffer);
    const received = Buffer.from(got.data.buffer, got.data.byteOffset, got.data.byteLength);
    expect(received.equals(sent)).toBe(true);
  });

  it('a key the owner does not have, and a subject nobody serves: unusable, at once', async () => {
    const started = Date.now();
    await expect(
      peer.fetch(replies, subject, 'missing', Date.now() + 10_000, () => undefined),
    ).rejects.toBeInstanceOf(PeerUnusable);
    await expect(
      peer.fetch(replies, `${subject}.nobody`, 'big', Date.now() + 10_000, () => undefined),
    ).rejects.toThrow(/no process answers/);
    expect(Date.now() - started).toBeLessThan(2_000); // not the lease, not the deadline
  });

  it('a flight in progress: its token count first, then its rows when its encode ends', async () => {
    const { flight } = store.claim('flying');
    const planned: number[] = [];
    const fetching = peer.fetch(replies, subject, 'flying', Date.now() + 10_000, (t) =>
      planned.push(t),
    );
    flight.plan(2);
    const data = new Float32Array([1, 2, 3, 4]);
    const entry = { key: 'flying', data, tokens: 2, dim: 2, grid: [[4]], bytes: 16, hits: 0 };
    setTimeout(() => store.land('flying', flight, entry), 50);
    const got = await fetching;
    expect(planned).toEqual([2]);
    expect(Array.from(got.data)).toEqual([1, 2, 3, 4]);
    expect(peer.stats).toMatchObject({ serving: 0 });
  });
});
