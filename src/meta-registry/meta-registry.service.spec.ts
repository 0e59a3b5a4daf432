import { TimeoutError } from 'rxjs';
import type { MetaRegistry } from './meta-registry.service';
import { makeRegistry } from './testing';

const META = { embedding_size: 4096, embedding_len: 1, embedding_dim: 1024 };

/**
 * Exact timing on fake timers, for the memory store. Behaviour shared by every store is in
 * meta-registry.contract.spec.ts (test/support/registry-contract.ts).
 */
describe('MetaRegistry timing (fake timers)', () => {
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
});
