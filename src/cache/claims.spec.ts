import { MemoryClaims, isDead, serveClaimCall, type ClaimRecord } from './claims';

const rec = (instance: string, until: number, pid?: number): ClaimRecord => ({
  owner: { instance, ...(pid === undefined ? {} : { pid }) },
  at: `p.v1.inst.${instance}.cache_fetch`,
  state: 'encoding',
  until,
});

describe('MemoryClaims (the DP supervisor keeps its ranks claims)', () => {
  let now = 1_000;
  const claims = () => new MemoryClaims(3, () => now);

  it('one owner per key: the second claimer is told who owns it', async () => {
    const c = claims();
    const first = await c.claim('k', rec('a', now + 500));
    expect(first).toEqual({ mine: true, revision: 1, tookOver: false });
    const second = await c.claim('k', rec('b', now + 500));
    expect(second).toMatchObject({
      mine: false,
      revision: 1,
      record: { owner: { instance: 'a' } },
    });
  });

  it('a lease past its end, or a revision found unusable, is taken over exactly once', async () => {
    const c = claims();
    await c.claim('k', rec('a', now + 500));
    now += 501;
    expect(await c.claim('k', rec('b', now + 500))).toEqual({
      mine: true,
      revision: 2,
      tookOver: true,
    });
    expect((await c.claim('k', rec('c', now + 500))).mine).toBe(false);
    expect(await c.claim('k', rec('c', now + 500), 2)).toEqual({
      mine: true,
      revision: 3,
      tookOver: true,
    });
    // A stale "unusable" (the claim moved on since) takes nothing over.
    expect((await c.claim('k', rec('d', now + 500), 2)).mine).toBe(false);
  });

  it('update and release act only on the caller revision', async () => {
    const c = claims();
    await c.claim('k', rec('a', now + 500));
    expect(await c.update('k', { ...rec('a', 0), state: 'cached' }, 7)).toBeUndefined();
    const next = await c.update('k', { ...rec('a', 0), state: 'cached' }, 1);
    expect(next).toBe(2);
    // A cached claim has no lease to run out.
    now += 10_000;
    expect((await c.claim('k', rec('b', now))).mine).toBe(false);
    await c.release('k', 1);
    expect(c.size).toBe(1);
    await c.release('k', 2);
    expect(c.size).toBe(0);
  });

  it('is bounded: a claim beyond the cap is not recorded (revision 0), and drains to zero', async () => {
    const c = claims();
    for (const k of ['a', 'b', 'c']) await c.claim(k, rec('x', now + 500, 42));
    expect(await c.claim('d', rec('x', now + 500))).toEqual({ mine: true, revision: 0 });
    expect(c.size).toBe(3);
    expect(c.dropPid(42)).toBe(3);
    expect(c.size).toBe(0);
  });

  it('serves the IPC calls of its workers', async () => {
    const c = claims();
    const r = rec('a', now + 500);
    expect(await serveClaimCall(c, { op: 'claim', key: 'k', record: r })).toEqual({
      mine: true,
      revision: 1,
      tookOver: false,
    });
    expect(await serveClaimCall(c, { op: 'update', key: 'k', record: r, revision: 1 })).toBe(2);
    expect(await serveClaimCall(c, { op: 'release', key: 'k', revision: 2 })).toBeNull();
    expect(c.size).toBe(0);
  });

  it('isDead: only an encoding lease expires', () => {
    expect(isDead(rec('a', 5), 1, 6)).toBe(true);
    expect(isDead(rec('a', 5), 1, 4)).toBe(false);
    expect(isDead({ ...rec('a', 5), state: 'cached' }, 1, 6)).toBe(false);
    expect(isDead({ ...rec('a', 5), state: 'cached' }, 1, 6, 1)).toBe(true);
  });
});
