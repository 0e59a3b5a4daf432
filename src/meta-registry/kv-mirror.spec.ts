import { encodeRecord } from './kv-codec';
import { KvMirror } from './kv-mirror';
import type { StoredMeta } from './meta-store';

const clock = { now: () => 1_000, elapsed: () => 0 };
const record = (instance: string): StoredMeta => ({
  reqId: 'r',
  metadata: { embedding_size: 8, embedding_len: 1, embedding_dim: 4 },
  publishedAt: 1_000,
  owner: { instance },
});
const bytes = (r: StoredMeta) => new TextEncoder().encode(encodeRecord(r));

describe('KvMirror: this process reads its own writes', () => {
  it("a write is read back at once, and the watcher's late echo of an older revision does not take it back", () => {
    const mirror = new KvMirror(clock, 5_000);
    expect(mirror.apply('r', 9, 'PUT', bytes(record('handed')))).toMatchObject({
      owner: { instance: 'handed' },
    });
    mirror.wrote('r', 10, record('me'));
    expect(mirror.recent('r', 0)?.owner).toEqual({ instance: 'me' });
    // The watcher behind: revision 9 again (a reconnect's replay) changes nothing.
    expect(mirror.apply('r', 9, 'PUT', bytes(record('handed')))).toBeUndefined();
    expect(mirror.recent('r', 0)?.owner).toEqual({ instance: 'me' });
    // Its echo of 10, and anything newer, are taken.
    expect(mirror.apply('r', 10, 'PUT', bytes(record('me')))).toBeDefined();
    expect(mirror.apply('r', 11, 'PUT', bytes(record('other')))).toBeDefined();
    expect(mirror.recent('r', 0)?.owner).toEqual({ instance: 'other' });
    // An own write older than what the watcher has seen loses.
    mirror.wrote('r', 10, record('me'));
    expect(mirror.recent('r', 0)?.owner).toEqual({ instance: 'other' });
  });

  it('a write of a revision deleted here stays deleted; a newer one ends the tombstone', () => {
    const mirror = new KvMirror(clock, 5_000);
    mirror.evict('r', 12);
    mirror.wrote('r', 12, record('me'));
    expect(mirror.recent('r', 0)).toBeUndefined();
    mirror.wrote('r', 13, record('me'));
    expect(mirror.recent('r', 0)?.owner).toEqual({ instance: 'me' });
    expect(mirror.isDeleted('r', 13)).toBe(false);
  });

  it('reset (the bucket made again, revisions from 1) drops records and tombstones', () => {
    const mirror = new KvMirror(clock, 5_000);
    mirror.wrote('r', 500, record('old'));
    mirror.evict('s', 400);
    mirror.reset();
    expect(mirror.sizes).toEqual({ mirror: 0, tombstones: 0 });
    mirror.wrote('r', 1, record('new'));
    expect(mirror.recent('r', 0)?.owner).toEqual({ instance: 'new' });
    expect(mirror.isDeleted('s', 1)).toBe(false);
  });
});
