import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { sleep } from '../common/backoff';
import { Clock } from '../common/clock';
import { Errors } from '../common/errors/error-catalogue';
import { MMError } from '../common/errors/mm-error';
import type { Modality } from '../common/kernel';
import { AppConfig } from '../config/app-config';
import { StagedStore, type StagedStoreStats } from './staged-store';
import { MetaRegistry } from '../meta-registry/meta-registry.service';
import type { Owner, StoredMeta } from '../meta-registry/meta-store';
import { isErrorMeta } from '../meta-registry/meta.schema';
import { ReqStateStore, type ReqState } from '../requests/req-state.store';
import { StoredOwners } from '../routing/stored-owners';
import { LifecycleEvents } from '../common/lifecycle-events';
import { parseEndpoint, type Endpoint } from '../transfer/embedding-transport';

/** Staged embeddings written to the store at once during a drain. */
const DRAIN_CONCURRENCY = 4;
/** How often a drain looks again for sends and encodes still running. */
const BUSY_POLL_MS = 20;

export interface HandoffStats {
  enabled: boolean;
  /** Handed to the cluster by this process's drain (it is stopping): written, and not written (lost). */
  handed_off: number;
  lost: number;
  /** Taken over here from the store (another instance stopped), and still held. */
  taken: number;
  /** Takeovers another instance won first (the call went there). */
  lost_claims: number;
  held: number;
  /** The last drain: how long it took, and how many it wrote. */
  last_drain?: { ms: number; written: number; lost: number };
  /** The staged bucket: objects written, read, deleted, and their bytes. */
  store: StagedStoreStats;
}

/**
 * Staged embeddings that outlive their process (EPD_CACHE_STORE=jetstream with
 * EPD_REGISTRY_STORE=jetstream). At shutdown, once the queue groups are left and in-flight
 * work has ended, every staged embedding not yet fully delivered is written to the object
 * store with its delivery state, and its owner record is pointed at the store, within
 * EPD_DRAIN_MS; what is not written by then is reported lost, as without the tier. A later
 * call for it on any instance (owner routing) takes it over: staged there, with the same
 * receive_count and acked destinations; its object is deleted when it is released, fully
 * delivered, or expires, and the store's own TTL (EPD_SEND_TIMEOUT_MS) ends it otherwise.
 */
@Injectable()
export class EmbeddingHandoff extends StoredOwners implements OnModuleInit {
  private readonly logger = new Logger('Handoff');
  readonly enabled: boolean;
  /**
   * req_ids this stopping process hands over (true once it has): calls for them wait, then
   * are answered elsewhere.
   */
  private readonly handed = new Map<string, Promise<boolean>>();
  /** req_ids taken over from the store and held here: their objects go when they end. */
  private readonly held = new Set<string>();
  /** Takeovers in progress: one read per req_id, whatever number of calls ask. */
  private readonly taking = new Map<string, Promise<Owner | undefined>>();
  private draining?: Promise<void>;
  /** Sends that were running on states handed off: the drain waits for them (afterSends). */
  private readonly sends: Promise<void>[] = [];
  private readonly counters = { handedOff: 0, lost: 0, taken: 0, lostClaims: 0 };
  private lastDrain?: HandoffStats['last_drain'];

  constructor(
    private readonly config: AppConfig,
    private readonly clock: Clock,
    private readonly store: StagedStore,
    private readonly states: ReqStateStore,
    private readonly registry: MetaRegistry,
    private readonly events: LifecycleEvents,
  ) {
    super();
    this.enabled = store.enabled;
  }

  /** Owner routing takes handed-off embeddings over here when the handoff is on. */
  get active(): boolean {
    return this.enabled;
  }

  onModuleInit(): void {
    if (!this.enabled) return;
    this.events.on('request.ended', (reqId) => {
      if (!this.held.delete(reqId)) return;
      this.store
        .release(reqId)
        .catch((err: unknown) =>
          this.logger.warn(
            { req_id: reqId, err: (err as Error).message },
            'could not delete a handed-off embedding from the object store (its TTL will)',
          ),
        );
    });
  }

  stats(): HandoffStats {
    return {
      enabled: this.enabled,
      handed_off: this.counters.handedOff,
      lost: this.counters.lost,
      taken: this.counters.taken,
      lost_claims: this.counters.lostClaims,
      held: this.held.size,
      ...(this.lastDrain ? { last_drain: this.lastDrain } : {}),
      store: this.store.stats(),
    };
  }

  handingOff(reqId: string): Promise<boolean> | undefined {
    return this.handed.get(reqId);
  }

  take(reqId: string, _owner: Owner, deadline: number): Promise<Owner | undefined> {
    if (this.states.get(reqId)) return Promise.resolve(undefined);
    let taking = this.taking.get(reqId);
    if (!taking) {
      taking = this.takeOnce(reqId, deadline).finally(() => this.taking.delete(reqId));
      this.taking.set(reqId, taking);
    }
    return taking;
  }

  takingNow(reqId: string): Promise<unknown> | undefined {
    return this.taking.get(reqId);
  }

  /**
   * Claims the owner record first (compare-and-set: of two instances a call reaches at
   * once, one wins and the other forwards to it; both taking it once left two copies, one
   * delivered after the other was released), then reads the object.
   */
  private async takeOnce(reqId: string, deadline: number): Promise<Owner | undefined> {
    // A stopping instance hands over and takes nothing back: what it took would be lost.
    if (this.draining) throw Errors.shuttingDown(reqId);
    const claim = await this.registry.claimHanded(reqId, this.registry.self);
    if (!claim.won) return this.takenElsewhere(reqId, claim.now);
    const was = claim.was;
    const found = await this.store.takeOver(reqId, deadline).catch(async (err: unknown) => {
      await this.unclaim(was);
      throw err instanceof MMError
        ? err
        : Errors.objectStoreUnavailable(this.store.bucket, (err as Error).message, reqId);
    });
    if (!found) {
      await this.unclaim(was);
      throw Errors.embeddingLost(
        reqId,
        `handed over, but not in object store ${this.store.bucket}`,
      );
    }
    const acked = found.acked.map(parseEndpoint).filter((e): e is Endpoint => e !== undefined);
    this.states.adopt(
      reqId,
      found.modality as Modality,
      found.partIdx,
      found.numParts,
      {
        data: found.data,
        tokens: found.tokens,
        dim: found.dim,
        dtype: found.dtype,
        bytes: found.bytes,
        grid: found.grid,
        ...(found.timing ? { timing: found.timing } : {}),
      },
      found.receiveCount,
      acked,
    );
    this.held.add(reqId);
    this.counters.taken++;
    this.logger.log({ req_id: reqId, bytes: found.bytes }, 'took over a handed-off embedding');
    return undefined;
  }

  /** The claim lost: to whom (the call goes there), or why nobody holds it. */
  private takenElsewhere(reqId: string, now: StoredMeta | undefined): Owner {
    const owner = now?.owner;
    if (!now || !owner || isErrorMeta(now.metadata)) {
      throw Errors.embeddingLost(reqId, 'handed over, but its metadata record is gone');
    }
    if (this.registry.isSelf(owner)) {
      // Recorded here, and not held here: taken and then let go (released or expired).
      throw Errors.embeddingLost(reqId, 'taken over here, and no longer held');
    }
    this.counters.lostClaims++;
    return owner;
  }

  private async unclaim(was: StoredMeta): Promise<void> {
    await this.registry
      .unclaimHanded(was)
      .catch((err: unknown) =>
        this.logger.warn(
          { req_id: was.reqId, err: (err as Error).message },
          'a takeover failed, and its owner record could not be pointed back at the store',
        ),
      );
  }

  /**
   * A release of a handed-off embedding: the owner record is claimed as for a takeover
   * (so no instance takes it over meanwhile), then its object is deleted; the release
   * itself then drops the record. When another instance took it first, the release goes
   * there (its owner, returned).
   */
  async drop(reqId: string): Promise<Owner | undefined> {
    const claim = await this.registry.claimHanded(reqId, this.registry.self);
    const owner = claim.won ? undefined : claim.now?.owner;
    // Taken over by another instance first: the release goes there.
    if (owner && owner.store === undefined && !this.registry.isSelf(owner)) return owner;
    await this.store
      .release(reqId)
      .catch((err: unknown) =>
        this.logger.warn(
          { req_id: reqId, err: (err as Error).message },
          'could not delete a handed-off embedding from the object store (its TTL will)',
        ),
      );
    return undefined;
  }

  /**
   * The drain, once: see the class. The `hand-off` shutdown phase: before this instance
   * leaves the roster (peers forward here meanwhile; gone from it first, they would answer
   * owner_gone for embeddings about to move) and before the registry closes.
   */
  drain(): Promise<void> {
    this.draining ??= this.drainOnce();
    return this.draining;
  }

  private async drainOnce(): Promise<void> {
    const started = this.clock.now();
    const until = started + this.config.shutdown.drainMs;
    // Sends and encodes still running end first (half the budget at most): their acks count.
    await this.whileBusy(
      () => this.states.list().some((s) => s.busy),
      started + this.config.shutdown.drainMs / 2,
    );
    const toHand = this.states.list().filter((s) => this.wanted(s));
    let written = 0;
    let lost = 0;
    // The idle ones first: a state whose send is still running holds a worker until the
    // send ends or EPD_DRAIN_MS passes, and four sends to receivers that never ack once
    // held every worker while 20 idle embeddings waited behind them and were lost.
    const queue = [...toHand].sort((x, y) => Number(x.busy) - Number(y.busy));
    const worker = async () => {
      for (let s = queue.shift(); s; s = queue.shift()) {
        if (this.clock.now() >= until) {
          lost++;
          continue;
        }
        const one = this.handOne(s, until);
        this.handed.set(
          s.reqId,
          one.then((outcome) => outcome === 'written'),
        );
        const outcome = await one;
        if (outcome === 'written') written++;
        else if (outcome === 'lost') lost++;
      }
    };
    await Promise.all(Array.from({ length: DRAIN_CONCURRENCY }, worker));
    await Promise.all(this.sends);
    this.counters.lost += lost;
    const ms = this.clock.now() - started;
    this.lastDrain = { ms, written, lost };
    if (toHand.length > 0 || lost > 0) {
      this.logger[lost > 0 ? 'warn' : 'log'](
        { written, lost, ms, bucket: this.store.bucket },
        lost > 0
          ? `handed ${written} staged embedding(s) to the cluster; ${lost} could not be written within EPD_DRAIN_MS and are lost`
          : `handed ${written} staged embedding(s) to the cluster`,
      );
    }
  }

  /** Waits while `busy()` holds, until `until` (epoch ms) at most. */
  private async whileBusy(busy: () => boolean, until: number): Promise<void> {
    while (busy() && this.clock.now() < until) await sleep(BUSY_POLL_MS);
  }

  /** Staged, not released, and not yet delivered to every receiver it expects. */
  private wanted(s: ReqState): boolean {
    return s.embedding !== undefined && !s.complete && !s.releaseRequested;
  }

  /**
   * Writes one staged embedding, points its owner record at the store, and lets it go here.
   * Calls for it that arrive meanwhile wait (handingOff). A send that began before (its
   * call already past the routing) ends first and the object is written again with its
   * ack; one that slips in after the check runs on, from memory, and if it completes the
   * delivery, the object nobody will take is deleted (afterSends).
   */
  private async handOne(state: ReqState, until: number): Promise<'written' | 'done' | 'lost'> {
    const reqId = state.reqId;
    try {
      for (;;) {
        await this.whileBusy(() => state.busy, until);
        const emb = state.embedding;
        if (!emb || !this.wanted(state)) return 'done';
        if (state.busy) return 'lost'; // a send still running at EPD_DRAIN_MS
        const record = await this.registry.get(reqId);
        if (!record || isErrorMeta(record.metadata)) return 'lost';
        const acked = this.ackedOf(state);
        await this.store.handOff(
          {
            reqId,
            modality: state.modality,
            partIdx: state.partIdx,
            numParts: state.numParts,
            receiveCount: state.receiveCount,
            acked,
            data: emb.data,
            tokens: emb.tokens,
            dim: emb.dim,
            dtype: emb.dtype,
            grid: emb.grid,
            bytes: emb.bytes,
            ...(emb.timing ? { timing: emb.timing } : {}),
          },
          until,
        );
        if (!this.wanted(state)) {
          await this.drop(reqId); // delivered or released while it was written
          return 'done';
        }
        if (state.busy || this.ackedOf(state).length !== acked.length) continue;
        const owner: Owner = {
          instance: `store:${this.store.bucket}`,
          store: this.store.bucket,
        };
        await this.registry.publish(reqId, record.metadata, record.partIdx, owner, until);
        if (state.phase === 'released') {
          // Delivered in full while the record was written: nobody is to take it over.
          await this.registry.discard(reqId).catch(() => undefined);
          await this.drop(reqId);
          return 'done';
        }
        this.held.delete(reqId); // its object now belongs to whoever takes it over
        const sending = state.busy;
        this.states.handOff(state);
        if (sending) this.sends.push(this.afterSends(state, until));
        this.counters.handedOff++;
        return 'written';
      }
    } catch (err) {
      this.logger.warn(
        { req_id: reqId, err: (err as Error).message },
        'could not hand a staged embedding to the cluster: it is lost with this process',
      );
      // Whatever of it landed is nobody's: its owner record does not point at it.
      await this.drop(reqId);
      return 'lost';
    }
  }

  private ackedOf(state: ReqState): string[] {
    return [...state.destinations.values()].filter((d) => d.status === 'acked').map((d) => d.key);
  }

  /** A send still running on a handed-off state: if it completes the delivery, its object goes. */
  private async afterSends(state: ReqState, until: number): Promise<void> {
    await this.whileBusy(() => state.busy, until);
    if (state.complete) await this.drop(state.reqId);
  }
}
