import { EmbeddingCache, type CacheEntry } from './embedding-cache';

const entry = (key: string, bytes: number): CacheEntry => ({
  key,
  data: new Float32Array(bytes / 4),
  tokens: bytes / 16,
  dim: 4,
  grid: [[1, 2, 2]],
  bytes,
  hits: 0,
});

describe('EmbeddingCache', () => {
  it('evicts the least recently used within its byte budget', () => {
    const cache = new EmbeddingCache(300);
    cache.put(entry('a', 100));
    cache.put(entry('b', 100));
    cache.put(entry('c', 100));
    expect(cache.get('a')).toBeDefined(); // a is now the most recent
    cache.put(entry('d', 100));
    expect(cache.get('b')).toBeUndefined();
    expect(cache.bytes).toBe(300);
    expect(cache.view().evictions).toBe(1);
    cache.put(entry('huge', 400)); // larger than the budget: not cached
    expect(cache.count).toBe(3);
  });

  it('keeps a purged entry alive for whoever still holds its rows', () => {
    const cache = new EmbeddingCache(1000);
    cache.put(entry('a', 100));
    const held = cache.get('a')!;
    expect(cache.purge()).toBe(1);
    expect(cache.bytes).toBe(0);
    expect(held.data.length).toBe(25);
  });

  it('runs one flight per key: the second claim joins, and gets the entry or the error', async () => {
    const cache = new EmbeddingCache(1000);
    const first = cache.claim('k');
    cache.counted('miss'); // the owner's outcome, once the cluster (if any) was asked
    const second = cache.claim('k');
    expect([first.mine, second.mine]).toEqual([true, false]);
    first.flight.plan(4);
    await expect(second.flight.planned).resolves.toBe(4);
    cache.land('k', first.flight, entry('k', 64));
    await expect(second.flight.done).resolves.toMatchObject({ key: 'k' });
    expect(cache.view()).toMatchObject({ misses: 1, joins: 1, in_flight: 0, entries: 1 });

    const failed = cache.claim('x');
    const joiner = cache.claim('x');
    cache.land('x', failed.flight, undefined, new Error('bad image'));
    await expect(joiner.flight.done).rejects.toThrow('bad image');
    await expect(joiner.flight.planned).rejects.toThrow('bad image');
    expect(cache.claim('x').mine).toBe(true); // a failure does not stick
  });

  it('tells who points others at an entry when it leaves: eviction and purge, not a re-put', () => {
    const dropped: string[] = [];
    const cache = new EmbeddingCache(200, (key) => dropped.push(key));
    cache.put(entry('a', 100));
    cache.put(entry('a', 100));
    cache.put(entry('b', 100));
    cache.put(entry('c', 100));
    expect(dropped).toEqual(['a']);
    cache.purge();
    expect(dropped).toEqual(['a', 'b', 'c']);
  });

  it('peek serves another process without counting a hit; flightOf finds a flight in progress', () => {
    const cache = new EmbeddingCache(1000);
    cache.put(entry('a', 100));
    expect(cache.peek('a')?.key).toBe('a');
    expect(cache.view().hits).toBe(0);
    const { flight } = cache.claim('b');
    expect(cache.flightOf('b')).toBe(flight);
    expect(cache.land('b', flight, entry('b', 100))).toBe(true);
    expect(cache.flightOf('b')).toBeUndefined();
  });
});
