import { backoffMs, sleep } from './backoff';

describe('backoff', () => {
  const policy = { baseMs: 100, maxMs: 2000, jitter: 0.5 };

  it('doubles from the base, caps at the maximum, and jitters the given fraction', () => {
    expect([1, 2, 3, 4, 5, 6].map((a) => backoffMs(a, policy, () => 1))).toEqual([
      100, 200, 400, 800, 1600, 2000,
    ]);
    expect(backoffMs(1, policy, () => 0)).toBe(50);
    expect(backoffMs(1000, policy, () => 0.5)).toBe(1500);
  });

  it('sleeps abortably, rejecting with the caller’s error', async () => {
    const controller = new AbortController();
    const slept = sleep(10_000, controller.signal, () => new Error('cancelled'));
    controller.abort();
    await expect(slept).rejects.toThrow('cancelled');
    await expect(sleep(1)).resolves.toBeUndefined();
  });
});
