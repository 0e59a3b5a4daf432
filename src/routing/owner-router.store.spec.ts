import { Clock } from '../common/clock';
import { Errors } from '../common/errors/error-catalogue';
import type { MetaRegistry } from '../meta-registry/meta-registry.service';
import type { Owner, StoredMeta } from '../meta-registry/meta-store';
import type { NatsForwarder } from '../transport/nats-forwarder';
import { DpType } from '../transport/subjects';
import type { InstanceRoster } from './instance-roster.service';
import type { LocalRanks } from './local-ranks';
import { OwnerRouter } from './owner-router.service';
import { NoStoredOwners, StoredOwners } from './stored-owners';

const STORE: Owner = { instance: 'store:b_staged', store: 'b_staged' };
const PEER: Owner = { instance: 'peer-a', boot: 'boot-1' };

/**
 * Owner routing of embeddings handed to the object store at shutdown: taken over, dropped
 * by a release, refused clearly where the tier is off, and reached again when the owner
 * handed one over while a forwarded call was on its way.
 */
describe('OwnerRouter: embeddings handed to the object store', () => {
  let owner: Owner | undefined;
  let forwarded: string[];
  let forwardError: Error | undefined;
  let router: OwnerRouter;
  /** A router over `owners` (the handoff's where it is on, NoStoredOwners where not). */
  let routerWith: (owners: StoredOwners) => OwnerRouter;
  let stored: StoredOwners & {
    taken: string[];
    dropped: string[];
    moving?: Promise<boolean>;
    takenBy?: Owner;
  };
  let earlier: boolean;
  /** Why the roster did not call the peer gone (whyAlive). */
  let aliveBecause: string;
  /** The forwarded call is never acknowledged (the forwarder's `unreachable`). */
  let silent: boolean;
  /** What the store holds now, when a lagging mirror (`record`) says otherwise. */
  let latest: Owner | undefined | 'as-mirror';

  const record = (): StoredMeta | undefined =>
    owner && {
      reqId: 'r',
      metadata: { embedding_size: 16, embedding_len: 1, embedding_dim: 4 },
      publishedAt: 0,
      owner,
    };

  beforeEach(() => {
    owner = STORE;
    forwarded = [];
    forwardError = undefined;
    earlier = false;
    aliveBecause = 'it heartbeat within the last three beats';
    silent = false;
    latest = 'as-mirror';
    const registry = {
      self: { instance: 'self' },
      lostInRestart: () => false,
      stagedByEarlierProcess: (o?: Owner) => earlier && o?.instance === 'self',
      get: () => Promise.resolve(record()),
      latest: () =>
        Promise.resolve(
          latest === 'as-mirror' ? record() : latest && { ...record()!, owner: latest },
        ),
      wait: () => Promise.reject(new Error('no wait here')),
    } as unknown as MetaRegistry;
    const forwarder = {
      toInstance: (
        instance: string,
        dp: string,
        _body: object,
        _deadline: number,
        _reqId: string,
        failures: { unreachable: (taken: boolean) => Error },
      ) => {
        forwarded.push(`epd.v1.inst.${instance}.${dp}`);
        if (silent) return Promise.reject(failures.unreachable(false));
        return forwardError ? Promise.reject(forwardError) : Promise.resolve('answered by peer');
      },
      resent: 0,
      probes: 0,
    } as unknown as NatsForwarder;
    const roster = {
      enabled: true,
      whyAlive: () => Promise.resolve(aliveBecause),
      mayBeAlive: () => true,
    } as unknown as InstanceRoster;
    const ranks = { active: false } as unknown as LocalRanks;
    routerWith = (owners) =>
      new OwnerRouter(registry, forwarder, roster, new Clock(), ranks, owners);
    stored = {
      active: true,
      taken: [],
      dropped: [],
      take(reqId: string) {
        this.taken.push(reqId);
        return Promise.resolve(this.takenBy);
      },
      drop(reqId: string) {
        this.dropped.push(reqId);
        return Promise.resolve(this.takenBy);
      },
      takingNow: () => undefined,
      handingOff() {
        return this.moving;
      },
    };
    router = routerWith(stored);
  });

  const route = (dp: DpType, local: () => Promise<string> = () => Promise.resolve('here')) =>
    router.route(dp, 'r', { req_id: 'r' }, Date.now() + 5000, local, { isLocal: () => false });

  it('takes a handed-off embedding over for a send, and drops it for a release', async () => {
    await expect(route(DpType.Send)).resolves.toBe('here');
    expect(stored.taken).toEqual(['r']);
    await expect(route(DpType.Release)).resolves.toBe('here');
    expect(stored.dropped).toEqual(['r']);
    expect(forwarded).toEqual([]);
    expect(router.stats.fromStore).toBe(2);
  });

  it('without the tier: embedding_lost naming the setting, and a release answered here', async () => {
    router = routerWith(new NoStoredOwners());
    await expect(route(DpType.Send)).rejects.toMatchObject({
      code: 503,
      type: 'embedding_lost',
      message: expect.stringContaining('EPD_CACHE_STORE is not jetstream here'),
    });
    await expect(route(DpType.Release)).resolves.toBe('here');
    expect(forwarded).toEqual([]);
  });

  it('reads the record again when the owner stopped while a forwarded call was on its way', async () => {
    owner = PEER;
    forwardError = Errors.shuttingDown('r');
    const answer = route(DpType.Send);
    // The peer's answer arrives after it pointed the record at the store.
    owner = STORE;
    await expect(answer).resolves.toBe('here');
    expect(forwarded).toHaveLength(1);
    expect(stored.taken).toEqual(['r']);
  });

  it("reads the store, not the mirror, when a restarted owner answers 404: the lagging mirror's owner handed it over", async () => {
    // Seen in a rolling restart: A handed the embedding to the store and came back under the
    // same instance id; B's mirror still named A's earlier process, so B forwarded to the new
    // A, which holds nothing and answered unknown_req_id; B passed that 404 on.
    owner = PEER; // the mirror, behind
    latest = STORE; // the bucket
    forwardError = Errors.unknownReqId('r');
    await expect(route(DpType.SendStatus)).resolves.toBe('here');
    expect(forwarded).toHaveLength(1);
    expect(stored.taken).toEqual(['r']);
    // Released for real (no record anywhere): the owner's 404 stands.
    stored.taken = [];
    latest = undefined;
    await expect(route(DpType.SendStatus)).rejects.toMatchObject({
      code: 404,
      type: 'unknown_req_id',
    });
    // The store names the same owner: its 404 stands too.
    latest = 'as-mirror';
    await expect(route(DpType.SendStatus)).rejects.toMatchObject({ code: 404 });
    expect(stored.taken).toEqual([]);
  });

  it('passes on an error that is not a stopping owner, without reading the record again', async () => {
    owner = PEER;
    forwardError = Errors.noStagedEmbedding('r');
    await expect(route(DpType.Send)).rejects.toMatchObject({ code: 500 });
    expect(stored.taken).toEqual([]);
  });

  it('a stopping instance that handed the req_id over answers shutting_down instead of 404', async () => {
    owner = undefined; // a forwarded call: no record lookup needed
    stored.moving = Promise.resolve(true);
    await expect(route(DpType.Send)).rejects.toMatchObject({ code: 503, type: 'shutting_down' });
    stored.moving = Promise.resolve(false); // the handoff failed: still answered here
    await expect(route(DpType.Send)).resolves.toBe('here');
  });

  it('forwards a call, and a release, to the instance that won the takeover', async () => {
    stored.takenBy = PEER;
    await expect(route(DpType.Send)).resolves.toBe('answered by peer');
    await expect(route(DpType.Release)).resolves.toBe('answered by peer');
    expect(forwarded).toEqual([
      expect.stringContaining('.inst.peer-a.send'),
      expect.stringContaining('.inst.peer-a.release'),
    ]);
    expect(router.stats.fromStore).toBe(0);
  });

  it("a forwarded call for an embedding this instance's previous process staged: embedding_lost", async () => {
    owner = { instance: 'self', boot: 'earlier-boot' };
    earlier = true;
    router = routerWith(new NoStoredOwners());
    const forwardedHere = (local: () => Promise<string>) =>
      router.route(DpType.Send, 'r', { req_id: 'r' }, Date.now() + 5000, local, {
        isLocal: () => false,
        forwarded: true,
      });
    await expect(forwardedHere(() => Promise.resolve('here'))).rejects.toMatchObject({
      code: 503,
      type: 'embedding_lost',
    });
    // Held here (this process staged it): answered here, whatever the record says.
    await expect(
      router.route(
        DpType.Send,
        'r',
        { req_id: 'r' },
        Date.now() + 5000,
        () => Promise.resolve('here'),
        {
          isLocal: () => true,
          forwarded: true,
        },
      ),
    ).resolves.toBe('here');
  });

  it('an owner not called gone and then silent: owner_unreachable says why it was not called gone', async () => {
    owner = PEER;
    silent = true;
    aliveBecause =
      "this instance's roster cannot tell (its own heartbeats are not being stored on time)";
    await expect(route(DpType.Send)).rejects.toMatchObject({
      code: 503,
      type: 'owner_unreachable',
      message: expect.stringContaining(
        "not called gone: this instance's roster cannot tell (its own heartbeats are not being stored on time); retry",
      ),
    });
    expect(router.stats.unreachable).toBe(1);
  });
});
