import { TimeoutError, type Subscription } from 'rxjs';
import { MMError } from '../common/errors/mm-error';
import type { MetaRegistry } from './meta-registry.service';
import { makeRegistry } from './testing';

const META = { embedding_size: 4096, embedding_len: 1, embedding_dim: 1024 };

/** Lets the store's resolved promises and RxJS deliveries run. */
const flush = () => jest.advanceTimersByTimeAsync(0);

describe('MetaRegistry', () => {
  let registry: MetaRegistry;

  beforeEach(() => {
    jest.useFakeTimers();
    ({ registry } = makeRegistry({ EPD_REQ_TIMEOUT_MS: '1000', EPD_SEND_TIMEOUT_MS: '5000' }));
    registry.onModuleInit();
  });

  afterEach(() => {
    registry.close();
    jest.useRealTimers();
  });

  it('wakes a waiter that started before the publish', async () => {
    const p = registry.wait('a');
    await flush();
    expect((await registry.stats()).waiters).toBe(1);
    await registry.publish('a', META, 0);
    await expect(p).resolves.toMatchObject({ reqId: 'a', metadata: META, partIdx: 0 });
    expect((await registry.stats()).waiters).toBe(0);
  });

  it('answers at once when the metadata was published before the wait', async () => {
    await registry.publish('a', META);
    const p = registry.wait('a', { timeoutMs: 10 });
    await flush();
    await expect(p).resolves.toMatchObject({ metadata: META });
  });

  it('last write wins', async () => {
    await registry.publish('a', META);
    await registry.publish('a', { ...META, embedding_len: 2 });
    await expect(registry.wait('a')).resolves.toMatchObject({ metadata: { embedding_len: 2 } });
  });

  it('times out exactly at the deadline with an RxJS TimeoutError and leaves nothing behind', async () => {
    const outcome = registry.wait('never', { timeoutMs: 250 }).catch((e: unknown) => e);
    await jest.advanceTimersByTimeAsync(249);
    expect((await registry.stats()).waiters).toBe(1);
    await jest.advanceTimersByTimeAsync(1);
    expect(await outcome).toBeInstanceOf(TimeoutError);
    const s = await registry.stats();
    expect(s).toMatchObject({ waiters: 0, waitedReqIds: 0, entries: 0 });
    expect(s.counters.timeouts).toBe(1);
  });

  it('uses EPD_REQ_TIMEOUT_MS when no deadline is given', async () => {
    const outcome = registry.wait('never').catch((e: unknown) => e);
    await jest.advanceTimersByTimeAsync(999);
    expect((await registry.stats()).waiters).toBe(1);
    await jest.advanceTimersByTimeAsync(1);
    expect(await outcome).toBeInstanceOf(TimeoutError);
  });

  it('answers waiters of an {error} entry with a 500 carrying the published text', async () => {
    const p = registry.wait('bad').catch((e: unknown) => e);
    await flush();
    await registry.publish('bad', { error: 'image decode failed' });
    const err = (await p) as MMError;
    expect(err).toBeInstanceOf(MMError);
    expect(err.code).toBe(500);
    expect(err.message).toBe('image decode failed');
  });

  it('cancelling one waiter leaves the others on the same req_id waiting', async () => {
    const ac = new AbortController();
    const cancelled = registry.wait('a', { signal: ac.signal }).catch((e: unknown) => e);
    const kept = registry.wait('a');
    await flush();
    ac.abort();
    const err = (await cancelled) as MMError;
    expect(err.code).toBe(499);
    expect((await registry.stats()).waiters).toBe(1);
    await registry.publish('a', META);
    await expect(kept).resolves.toMatchObject({ metadata: META });
    expect(await registry.stats()).toMatchObject({ waiters: 0, waitedReqIds: 0 });
  });

  it('unsubscribing a wait$ frees its slot', async () => {
    const subs: Subscription[] = [];
    for (let i = 0; i < 10; i++)
      subs.push(registry.wait$(`r${i % 3}`).subscribe({ error: () => undefined }));
    await flush();
    expect(await registry.stats()).toMatchObject({ waiters: 10, waitedReqIds: 3 });
    subs.forEach((s) => s.unsubscribe());
    expect(await registry.stats()).toMatchObject({ waiters: 0, waitedReqIds: 0 });
    expect((await registry.stats()).counters.cancelled).toBe(10);
  });

  it('a publish touches only the waiters of its own req_id', async () => {
    const others = Array.from({ length: 100 }, (_, i) =>
      registry.wait(`other-${i}`, { timeoutMs: 100 }).catch(() => 'timeout'),
    );
    const mine = registry.wait('mine');
    await flush();
    await registry.publish('mine', META);
    await expect(mine).resolves.toBeDefined();
    expect((await registry.stats()).waiters).toBe(100);
    await jest.advanceTimersByTimeAsync(100);
    expect(await Promise.all(others)).toEqual(Array(100).fill('timeout'));
  });

  it('discard drops the entry; has/get agree', async () => {
    await registry.publish('a', META);
    expect(await registry.has('a')).toBe(true);
    expect(await registry.discard('a')).toBe(true);
    expect(await registry.discard('a')).toBe(false);
    expect(await registry.has('a')).toBe(false);
    expect(await registry.get('a')).toBeUndefined();
  });

  it('expires entries after EPD_SEND_TIMEOUT_MS (within one sweep interval), re-publish renews', async () => {
    await registry.publish('old', META);
    await jest.advanceTimersByTimeAsync(3000);
    await registry.publish('young', META);
    await jest.advanceTimersByTimeAsync(3100); // t=6100: the sweep at 6000 drops 'old' only
    expect(await registry.has('old')).toBe(false);
    expect(await registry.has('young')).toBe(true);
    await registry.publish('young', META);
    await jest.advanceTimersByTimeAsync(4000); // t=10100: 'young' is 4 s old
    expect(await registry.has('young')).toBe(true);
    await jest.advanceTimersByTimeAsync(2000); // t=12100: swept at 12000
    const s = await registry.stats();
    expect(s.entries).toBe(0);
    expect(s.counters.expired).toBe(2);
  });

  it('refuses waits beyond the waiter bound with 503 and publishes beyond the entry bound with 507', async () => {
    registry.close();
    ({ registry } = makeRegistry({ EPD_REGISTRY_MAX_WAITERS: '2', EPD_REGISTRY_MAX_ENTRIES: '2' }));
    const a = registry.wait('a').catch(() => undefined);
    const b = registry.wait('b').catch(() => undefined);
    await expect(registry.wait('c')).rejects.toMatchObject({ code: 503 });
    await registry.publish('a', META);
    await registry.publish('b', META);
    await expect(registry.publish('c', META)).rejects.toMatchObject({ code: 507 });
    await registry.publish('a', META); // overwriting is not growth
    await Promise.all([a, b]);
  });

  it('close() answers pending waits with 503 "encoder shutting down" and refuses new ones', async () => {
    const p = registry.wait('a').catch((e: unknown) => e);
    const q = registry.wait('b').catch((e: unknown) => e);
    await flush();
    registry.close();
    for (const err of [await p, await q]) {
      expect(err).toMatchObject({ code: 503, message: 'encoder shutting down' });
    }
    await expect(registry.wait('c')).rejects.toMatchObject({ code: 503 });
    expect(await registry.stats()).toMatchObject({ waiters: 0, waitedReqIds: 0 });
  });

  it('an already-aborted signal fails at once without registering a waiter', async () => {
    const ac = new AbortController();
    ac.abort();
    await expect(registry.wait('a', { signal: ac.signal })).rejects.toMatchObject({ code: 499 });
    expect((await registry.stats()).waiters).toBe(0);
  });
});
