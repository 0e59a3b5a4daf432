import { discard, giveBack, parcelChannel, ship, unpack } from '../workers/parcel';
import { awaitReturn, inputBuffer, inputPoolStats, releaseInputPool } from './input-pool';

/**
 * The preprocessing side's buffer reuse, through real MessagePorts in one thread: what the
 * inference thread gives back is patchified into next, within the pool's bounds, and an
 * idle pool lets everything go.
 */
describe('input pool', () => {
  beforeEach(() => releaseInputPool());
  afterAll(() => releaseInputPool());

  /** One request's trip: filled here, shipped, read by the "inference thread", given back. */
  function trip(length: number, back = true) {
    const values = inputBuffer(length);
    values.fill(1.5);
    const { send, receive } = parcelChannel();
    ship(send, values);
    awaitReturn(send);
    const parcel = { port: receive };
    const read = unpack(parcel);
    expect(read).toHaveLength(length);
    expect(read[length - 1]).toBe(1.5);
    if (back) giveBack(parcel, read);
    else discard(parcel);
    return read;
  }

  it('reuses a buffer given back, for a request of the same or a smaller size', () => {
    const before = inputPoolStats();
    trip(1000);
    expect(inputPoolStats()).toMatchObject({ free: 1, awaiting: 0 });
    const smaller = inputBuffer(600); // the returned 4000-byte buffer, viewed shorter
    expect(smaller).toHaveLength(600);
    expect(smaller.buffer.byteLength).toBe(4000);
    const after = inputPoolStats();
    expect(after.reused - before.reused).toBe(1);
    expect(after.fresh - before.fresh).toBe(1); // only the first trip's
    expect(after.free).toBe(0);
  });

  it('makes a fresh buffer when none that was given back is large enough', () => {
    trip(100);
    const before = inputPoolStats();
    expect(inputBuffer(101).buffer.byteLength).toBe(404);
    expect(inputPoolStats().fresh - before.fresh).toBe(1);
    expect(inputPoolStats().free).toBe(1); // the small one still waits for a request it fits
  });

  it('picks the smallest buffer that fits', () => {
    const big = inputBuffer(5000);
    const small = inputBuffer(2000);
    for (const values of [big, small]) {
      const { send, receive } = parcelChannel();
      ship(send, values);
      awaitReturn(send);
      giveBack({ port: receive }, unpack({ port: receive }));
    }
    expect(inputBuffer(1500).buffer.byteLength).toBe(8000);
    expect(inputBuffer(1500).buffer.byteLength).toBe(20000);
  });

  it('is bounded: parcels never given back are let go, and only two buffers wait', () => {
    for (let i = 0; i < 20; i++) trip(10, false); // discarded on the main thread: never back
    expect(inputPoolStats().awaiting).toBe(8);
    for (let i = 0; i < 5; i++) {
      const { send, receive } = parcelChannel();
      ship(send, new Float32Array(10 + i));
      awaitReturn(send);
      giveBack({ port: receive }, unpack({ port: receive }));
    }
    const stats = inputPoolStats();
    expect(stats.free).toBe(2);
    expect(stats.freeBytes).toBe(4 * (13 + 14)); // the latest two
  });

  it('does not keep a buffer over 64 MiB', () => {
    const { send, receive } = parcelChannel();
    ship(send, new Float32Array(16 * 2 ** 20 + 1));
    awaitReturn(send);
    giveBack({ port: receive }, unpack({ port: receive }));
    expect(inputPoolStats()).toMatchObject({ free: 0, awaiting: 0 });
  });

  it('drains to zero when released (idle)', () => {
    trip(1000);
    trip(2000);
    trip(3000, false); // discarded: its buffer stays out, its parcel is watched
    expect(inputPoolStats()).toMatchObject({ free: 2, awaiting: 1 });
    releaseInputPool();
    expect(inputPoolStats()).toMatchObject({ free: 0, freeBytes: 0, awaiting: 0 });
  });
});
