import { TimeoutError, type Subscription } from 'rxjs';
import { MMError } from '../../src/common/errors/mm-error';
import type { MetaRegistry } from '../../src/meta-registry/meta-registry.service';
import { pause, waitFor } from './wait';

/**
 * The registry's behaviour, one suite for every store (memory in the unit project,
 * JetStream KV in e2e): whatever keeps the records, a caller sees the same thing. Real
 * time with short deadlines, since a real NATS connection does not run on fake timers;
 * only lower bounds on time are asserted (timing claims live in bench/).
 */
export interface RegistryHarness {
  registry: MetaRegistry;
  close(): Promise<void>;
}

/** Builds a registry (and its store) with these EPD_* overrides; each call a fresh store. */
export type MakeRegistry = (env: Record<string, string>) => Promise<RegistryHarness>;

export const META = { embedding_size: 4096, embedding_len: 1, embedding_dim: 1024 };

export function registryContract(make: MakeRegistry): void {
  let h: RegistryHarness;
  let registry: MetaRegistry;
  const open = async (env: Record<string, string> = {}) => {
    h = await make({ EPD_REQ_TIMEOUT_MS: '1000', EPD_SEND_TIMEOUT_MS: '5000', ...env });
    registry = h.registry;
  };
  /** Until `n` waits are registered (a wait registers on subscription, after its caller's turn). */
  const waiters = (n: number) => waitFor(async () => (await registry.stats()).waiters === n);

  beforeEach(() => open());
  afterEach(() => h.close());

  it('wakes a waiter that started before the publish', async () => {
    const p = registry.wait('a');
    await waiters(1);
    expect((await registry.stats()).waiters).toBe(1);
    await registry.publish('a', META, 0);
    await expect(p).resolves.toMatchObject({ reqId: 'a', metadata: META, partIdx: 0 });
    expect((await registry.stats()).waiters).toBe(0);
  });

  it('answers at once when the metadata was published before the wait', async () => {
    await registry.publish('a', META);
    await expect(registry.wait('a', { timeoutMs: 500 })).resolves.toMatchObject({
      metadata: META,
    });
  });

  it('a handed-off record is claimed by one of many concurrent claimers; an unclaim gives it back', async () => {
    const handed = { instance: 'gone', boot: 'b0', store: 'objs_staged' };
    await registry.publish('h', META, 0, handed);
    const me = registry.self;
    // Two claims at once (in KV, two compare-and-sets on one revision): one wins.
    const claims = await Promise.all([
      registry.claimHanded('h', me),
      registry.claimHanded('h', me),
    ]);
    expect(claims.filter((c) => c.won)).toHaveLength(1);
    const lost = claims.find((c) => !c.won);
    expect(lost).toMatchObject({ won: false, now: { owner: { instance: me.instance } } });
    expect((await registry.get('h'))?.owner).toMatchObject({ instance: me.instance });
    // A record that names an instance (not a store) is not claimable.
    expect(await registry.claimHanded('h', { instance: 'other' })).toMatchObject({ won: false });
    const won = claims.find((c) => c.won)!;
    if (!won.won) throw new Error('unreachable');
    await registry.unclaimHanded(won.was);
    expect((await registry.get('h'))?.owner).toEqual(handed);
    // Nothing stored: refused, with nothing to name.
    expect(await registry.claimHanded('absent', me)).toEqual({ won: false, now: undefined });
  });

  /**
   * read-your-writes: with JetStream KV, a read was answered from the watcher's mirror,
   * which still held the record before this process's own write until the watcher echoed
   * it: one fresh-clone CI run read the claimed owner right after an unclaim (above). Each
   * write here is read back at once, many times over, so a lagging mirror shows.
   */
  it('a process reads its own writes at once: after a publish, a claim and an unclaim', async () => {
    const stale: string[] = [];
    const handed = { instance: 'gone', boot: 'b0', store: 'objs_staged' };
    for (let n = 0; n < 100; n++) {
      const key = `ryw-${n % 4}`;
      await registry.publish(key, { ...META, embedding_len: n + 1 }, 0, handed);
      const published = await registry.get(key);
      const len = (published?.metadata as { embedding_len?: number } | undefined)?.embedding_len;
      if (len !== n + 1) stale.push(`publish ${n}`);
      if (published?.owner?.store !== handed.store) stale.push(`publish ${n} owner`);
      const claim = await registry.claimHanded(key, registry.self);
      if (!claim.won) throw new Error(`claim ${n} lost: ${JSON.stringify(claim.now)}`);
      if ((await registry.get(key))?.owner?.instance !== registry.self.instance)
        stale.push(`claim ${n}`);
      await registry.unclaimHanded(claim.was);
      if ((await registry.get(key))?.owner?.store !== handed.store) stale.push(`unclaim ${n}`);
    }
    expect(stale).toEqual([]);
  });

  it('last write wins', async () => {
    await registry.publish('a', META);
    await registry.publish('a', { ...META, embedding_len: 2 });
    await expect(registry.wait('a')).resolves.toMatchObject({ metadata: { embedding_len: 2 } });
  });

  it('times out at the deadline, not before, with an RxJS TimeoutError and leaves nothing behind', async () => {
    const started = Date.now();
    const outcome = registry.wait('never', { timeoutMs: 250 }).catch((e: unknown) => e);
    await waiters(1);
    expect((await registry.stats()).waiters).toBe(1);
    expect(await outcome).toBeInstanceOf(TimeoutError);
    expect(Date.now() - started).toBeGreaterThanOrEqual(245);
    const s = await registry.stats();
    expect(s).toMatchObject({ waiters: 0, waitedReqIds: 0, entries: 0 });
    expect(s.counters.timeouts).toBe(1);
  });

  it('uses EPD_REQ_TIMEOUT_MS when no deadline is given', async () => {
    await h.close();
    await open({ EPD_REQ_TIMEOUT_MS: '300' });
    const started = Date.now();
    expect(await registry.wait('never').catch((e: unknown) => e)).toBeInstanceOf(TimeoutError);
    expect(Date.now() - started).toBeGreaterThanOrEqual(295);
  });

  it('answers waiters of an {error} entry with a 500 carrying the published text', async () => {
    const p = registry.wait('bad').catch((e: unknown) => e);
    await waiters(1);
    await registry.publish('bad', { error: 'decode failed: truncated PNG' });
    const err = await p;
    expect(err).toBeInstanceOf(MMError);
    expect(err).toMatchObject({ code: 500, message: 'decode failed: truncated PNG' });
    await expect(registry.wait('bad')).rejects.toMatchObject({ code: 500 });
  });

  it('cancelling one waiter leaves the others on the same req_id waiting', async () => {
    const ac = new AbortController();
    const cancelled = registry.wait('a', { signal: ac.signal }).catch((e: unknown) => e);
    const kept = registry.wait('a');
    await waiters(2);
    ac.abort();
    expect(await cancelled).toMatchObject({ code: 499, message: 'metadata wait cancelled' });
    expect((await registry.stats()).waiters).toBe(1);
    await registry.publish('a', META);
    await expect(kept).resolves.toMatchObject({ metadata: META });
    expect(await registry.stats()).toMatchObject({ waiters: 0, waitedReqIds: 0 });
  });

  it('unsubscribing a wait$ frees its slot', async () => {
    const sub: Subscription = registry.wait$('a').subscribe({ error: () => undefined });
    await waiters(1);
    expect(await registry.stats()).toMatchObject({ waiters: 1, waitedReqIds: 1 });
    sub.unsubscribe();
    expect(await registry.stats()).toMatchObject({ waiters: 0, waitedReqIds: 0 });
    expect((await registry.stats()).counters.cancelled).toBe(1);
  });

  it('a publish touches only the waiters of its own req_id', async () => {
    const others = Array.from({ length: 100 }, (_, i) =>
      registry.wait(`other-${i}`, { timeoutMs: 400 }).catch(() => 'timeout'),
    );
    const mine = registry.wait('mine');
    await waiters(101);
    await registry.publish('mine', META);
    await expect(mine).resolves.toMatchObject({ reqId: 'mine' });
    expect((await registry.stats()).waiters).toBe(100);
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

  it('expires entries after EPD_SEND_TIMEOUT_MS; a re-publish renews', async () => {
    await h.close();
    await open({ EPD_SEND_TIMEOUT_MS: '1500' });
    await registry.publish('old', META);
    await registry.publish('young', META);
    await pause(1000, 'young is published again a second later, renewing its TTL');
    await registry.publish('young', META); // renewed: 1.5 s from now
    expect(await waitFor(async () => !(await registry.has('old')), 3000)).toBe(true);
    expect(await registry.has('young')).toBe(true);
    expect(await waitFor(async () => (await registry.stats()).entries === 0, 3000)).toBe(true);
  });

  it('refuses waits beyond the waiter bound with 503 and publishes beyond the entry bound with 507', async () => {
    await h.close();
    await open({ EPD_REGISTRY_MAX_WAITERS: '2', EPD_REGISTRY_MAX_ENTRIES: '2' });
    const a = registry.wait('a').catch(() => undefined);
    const b = registry.wait('b').catch(() => undefined);
    await waiters(2);
    await expect(registry.wait('c')).rejects.toMatchObject({ code: 503 });
    await registry.publish('a', META);
    await registry.publish('b', META);
    await expect(registry.publish('c', META)).rejects.toMatchObject({ code: 507 });
    await registry.publish('a', META); // overwriting is not growth
    await registry.discard('b');
    await registry.publish('c', META); // a discard frees its place
    await Promise.all([a, b]);
  });

  it('close() answers pending waits with 503 "encoder shutting down" and refuses new ones', async () => {
    const p = registry.wait('a').catch((e: unknown) => e);
    const q = registry.wait('b').catch((e: unknown) => e);
    await waiters(2);
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

  it('keeps any req_id apart and intact: spaces, wildcards, dots, unicode, 512 characters', async () => {
    const ids = [
      'plain-id_0',
      'with space',
      'star*',
      'gt>',
      'a.b.c',
      '.leading',
      'ünïcødé-画像-🖼',
      'x'.repeat(512),
      'i.plain-id_0', // looks like an encoded key: must not collide with 'plain-id_0'
    ];
    for (const [i, id] of ids.entries()) {
      await registry.publish(id, { ...META, embedding_len: i + 1 });
    }
    for (const [i, id] of ids.entries()) {
      await expect(registry.wait(id, { timeoutMs: 500 })).resolves.toMatchObject({
        reqId: id,
        metadata: { embedding_len: i + 1 },
      });
    }
    expect((await registry.stats()).entries).toBe(ids.length);
  });
}
