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

  /**
   * `values` shipped in a parcel and read by the "inference thread" (`read` sees them),
   * which gives their buffer back, or (`back` false) the main thread discards the parcel.
   * Returns the array read: empty once its buffer went back.
   */
  function shipAndRead(
    values: Float32Array,
    back = true,
    read: (values: Float32Array) => void = () => undefined,
  ): Float32Array {
    const { send, receive } = parcelChannel();
    ship(send, values);
    awaitReturn(send);
    const parcel = { port: receive };
    const got = unpack(parcel);
    read(got);
    if (back) giveBack(parcel, got);
    else discard(parcel);
    return got;
  }

  /** One request's trip: a pool buffer filled here, then shipped and read. */
  function trip(length: number, back = true) {
    const values = inputBuffer(length);
    values.fill(1.5);
    shipAndRead(values, back, (got) => {
      expect(got).toHaveLength(length);
      expect(got[length - 1]).toBe(1.5);
    });
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
    for (const values of [big, small]) shipAndRead(values);
    expect(inputBuffer(1500).buffer.byteLength).toBe(8000);
    expect(inputBuffer(1500).buffer.byteLength).toBe(20000);
  });

  it('is bounded: parcels never given back are let go, and at most 48 MiB waits', () => {
    for (let i = 0; i < 20; i++) trip(10, false); // discarded on the main thread: never back
    expect(inputPoolStats().awaiting).toBe(8);
    const MiB = 2 ** 20;
    for (const mib of [20, 10, 24, 8]) shipAndRead(new Float32Array((mib * MiB) / 4));
    const stats = inputPoolStats();
    expect(stats.freeBytes).toBe((10 + 24 + 8) * MiB); // the oldest (20 MiB) went first
    expect(stats.free).toBe(3);
  });

  it('is not given a buffer over 32 MiB back: the inference thread frees it at once', () => {
    const values = shipAndRead(new Float32Array(8 * 2 ** 20 + 1));
    expect(values).toHaveLength(8 * 2 ** 20 + 1); // not sent: still here, for the collector
    expect(inputPoolStats()).toMatchObject({ free: 0, awaiting: 1 });
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
