import { Injectable, Logger } from '@nestjs/common';
import type { NatsContext } from '@nestjs/microservices';
import { Clock } from '../common/clock';
import { Errors } from '../common/errors/error-catalogue';
import { MMError } from '../common/errors/mm-error';
import { MetaRegistry } from '../meta-registry/meta-registry.service';
import type { Owner } from '../meta-registry/meta-store';
import { NatsForwarder } from '../transport/nats-forwarder';
import { isInstanceSubject, type DpType } from '../transport/subjects';
import { InstanceRoster } from './instance-roster.service';
import { LocalRanks } from './local-ranks';
import { StoredOwners } from './stored-owners';

export interface RouteOptions {
  /** Whether this instance holds state for the req_id (then the call is answered here). */
  isLocal: () => boolean;
  /** The call came in on this instance's own subject: a peer forwarded it here. */
  forwarded?: boolean;
  /**
   * Wait (to the deadline) for the metadata of a req_id nobody has encoded yet, as `send`
   * and `register_destinations` wait today for an encode to start. Without it, an unknown
   * req_id is answered here at once (`release`, `send_status`).
   */
  waitForEncode?: boolean;
}

/**
 * A forwarded call's errors that may mean the embedding moved: its owner stopping, gone,
 * or (its record read here from a mirror that lagged the handoff) restarted under the same
 * instance id and holding nothing: the record is read again from the store itself.
 */
const MAY_HAVE_MOVED = new Set(['shutting_down', 'owner_gone', 'unknown_req_id']);

/**
 * The options of a call arriving at a controller: answered here when this instance holds
 * (or recently released) the req_id, or when a peer forwarded it here already.
 */
export function routeOptions(
  states: { answersFor(reqId: string): boolean },
  reqId: string,
  ctx?: NatsContext,
  waitForEncode = false,
): RouteOptions {
  return {
    isLocal: () => states.answersFor(reqId),
    forwarded: ctx !== undefined && isInstanceSubject(ctx.getSubject()),
    waitForEncode,
  };
}

/**
 * Owner routing: a per-req_id call that reaches a process which does not hold the req_id's
 * staged embedding goes to the owner recorded with the metadata, with the remaining
 * deadline, and the owner's answer (value or error) is returned unchanged. Owners are
 * peer instances (EPD_REGISTRY_STORE=jetstream; forwarded over NATS to the instance,
 * which routes on to its rank) and this instance's DP workers (EPD_DP_SIZE > 1; through
 * the supervisor's LocalRanks, which also knows the rank of an encode still in flight).
 * Never a silent retry elsewhere: an owner that is gone gives 503 `owner_gone` at once,
 * one that never acknowledges the call (NatsForwarder) 503 `owner_unreachable` within
 * about a second.
 * A single process on the memory store, and every DP worker, answers every call itself.
 */
@Injectable()
export class OwnerRouter {
  private readonly logger = new Logger('OwnerRouter');
  private readonly counters = {
    local: 0,
    forwarded: 0,
    toRank: 0,
    fromStore: 0,
    ownerGone: 0,
    unreachable: 0,
  };
  private readonly routes: boolean;

  constructor(
    private readonly registry: MetaRegistry,
    private readonly forwarder: NatsForwarder,
    private readonly roster: InstanceRoster,
    private readonly clock: Clock,
    private readonly ranks: LocalRanks,
    /** Embeddings handed to the object store by a stopped instance (the handoff's, when on). */
    private readonly stored: StoredOwners,
  ) {
    // A supervisor routes to its workers; a single process on a shared store to its peers
    // (a DP worker is in no roster: its supervisor routes for it).
    this.routes = ranks.active || roster.enabled;
  }

  /**
   * `resent`: forwarded attempts sent again after no receipt within RECEIPT_MS;
   * `probes`: forwarded calls asked again (PROBE_MS) after the owner took them;
   * `unreachable`: forwarded calls no attempt of which was acknowledged.
   */
  get stats(): {
    local: number;
    forwarded: number;
    toRank: number;
    fromStore: number;
    ownerGone: number;
    unreachable: number;
    resent: number;
    probes: number;
  } {
    return { ...this.counters, resent: this.forwarder.resent, probes: this.forwarder.probes };
  }

  async route<T>(
    dp: DpType,
    reqId: string,
    body: object,
    deadline: number,
    local: () => Promise<T>,
    options: RouteOptions,
  ): Promise<T> {
    if (dp !== 'release' && this.registry.lostInRestart(reqId)) {
      // Held by this service's previous process (restart ledger, memory store): gone with it.
      this.counters.ownerGone++;
      throw Errors.embeddingLost(reqId);
    }
    // Taking it over here right now (its record may already name this instance): the call
    // is answered once the embedding is staged here, or routed again if the takeover failed.
    const taking = this.stored.takingNow(reqId);
    if (taking) await taking.catch(() => undefined);
    if (options.forwarded && !this.ranks.active && !options.isLocal()) {
      // Forwarded here by a peer, and not held here: if this instance's previous process
      // staged it (a crash, then a restart under the same EPD_INSTANCE_ID), it is lost, as
      // a call that came straight here is told (not "already released").
      const recorded = (await this.registry.get(reqId).catch(() => undefined))?.owner;
      if (this.registry.stagedByEarlierProcess(recorded)) {
        this.counters.ownerGone++;
        throw Errors.embeddingLost(reqId);
      }
    }
    const owner = this.routes ? await this.ownerFor(reqId, deadline, options) : undefined;
    if (owner?.store !== undefined) {
      if (this.stored.active) return this.fromStore(dp, reqId, body, owner, deadline, local);
      // An instance without the tier (a mixed fleet): it cannot read the store.
      if (dp !== 'release') {
        this.counters.ownerGone++;
        throw Errors.embeddingLost(
          reqId,
          `handed to object store ${owner.store}, which this instance does not read (EPD_CACHE_STORE is not jetstream here)`,
        );
      }
      this.counters.local++;
      return local(); // a release: its metadata goes here, its object with the bucket's age
    }
    if (owner && owner.instance !== this.registry.self.instance) {
      return this.forward<T>(dp, reqId, body, deadline, owner).catch(async (err: unknown) => {
        // Handed to the cluster (or taken by another instance) while the call was on its way.
        const moved = await this.movedFrom(owner, reqId, err);
        if (!moved) throw err;
        if (moved.store !== undefined && this.stored.active)
          return this.fromStore(dp, reqId, body, moved, deadline, local);
        return this.forward<T>(dp, reqId, body, deadline, moved);
      });
    }
    if (owner?.rank !== undefined && this.ranks.active) {
      this.counters.toRank++;
      return this.ranks.call<T>(owner, dp, reqId, body, deadline);
    }
    if (this.registry.stagedByEarlierProcess(owner)) {
      // Staged by this instance's previous process (same EPD_INSTANCE_ID): gone with it.
      this.counters.ownerGone++;
      throw Errors.embeddingLost(reqId);
    }
    const moving = this.stored.handingOff(reqId);
    if (moving && (await moving)) {
      // Stopping, and handed to the cluster: the caller reads the owner record again.
      throw Errors.shuttingDown(reqId);
    }
    this.counters.local++;
    return local();
  }

  /**
   * A call for an embedding in the object store: taken over here (a release drops it), or
   * forwarded to the instance that took it over first.
   */
  private async fromStore<T>(
    dp: DpType,
    reqId: string,
    body: object,
    owner: Owner,
    deadline: number,
    local: () => Promise<T>,
  ): Promise<T> {
    const elsewhere =
      dp === 'release'
        ? await this.stored.drop(reqId)
        : await this.stored.take(reqId, owner, deadline);
    if (elsewhere) return this.forward<T>(dp, reqId, body, deadline, elsewhere);
    this.counters.fromStore++;
    return local();
  }

  /** After a forwarded call failed as a stopping owner's would: its new owner, if it has one. */
  private async movedFrom(owner: Owner, reqId: string, err: unknown): Promise<Owner | undefined> {
    if (!(err instanceof MMError) || !MAY_HAVE_MOVED.has(err.type)) return undefined;
    const now = (await this.registry.latest(reqId).catch(() => undefined))?.owner;
    if (!now || (now.instance === owner.instance && now.boot === owner.boot)) return undefined;
    if (now.store === undefined && now.instance === this.registry.self.instance) return undefined;
    return now;
  }

  private async ownerFor(
    reqId: string,
    deadline: number,
    options: RouteOptions,
  ): Promise<Owner | undefined> {
    if (this.ranks.active) {
      // A supervisor holds nothing itself, so a call a peer forwarded here still needs its rank.
      const inflight = this.ranks.inflightOwner(reqId);
      if (inflight) return inflight;
    } else if (options.forwarded) {
      return undefined;
    }
    return options.isLocal() ? undefined : this.ownerOf(reqId, deadline, options);
  }

  /** The recorded owner; for a req_id with no metadata yet, optionally waits for it. */
  private async ownerOf(
    reqId: string,
    deadline: number,
    options: RouteOptions,
  ): Promise<Owner | undefined> {
    const record = await this.registry.get(reqId);
    if (record || !options.waitForEncode) return record?.owner;
    const timeoutMs = Math.max(1, deadline - this.clock.now());
    // Any outcome but a record (deadline, a published error) leaves the call here, which
    // answers it as it does today; an {error} record still names its owner.
    const published = await this.registry.wait(reqId, { timeoutMs }).catch(() => undefined);
    if (options.isLocal()) return undefined; // the encode started here meanwhile
    // A wait answered by an {error} record rejects: read that record for its owner.
    return (published ?? (await this.registry.get(reqId).catch(() => undefined)))?.owner;
  }

  private async forward<T>(
    dp: DpType,
    reqId: string,
    body: object,
    deadline: number,
    owner: Owner,
  ): Promise<T> {
    const alive = await this.roster.whyAlive(owner.instance);
    if (alive === undefined) throw this.gone(owner, reqId);
    this.counters.forwarded++;
    return this.forwarder.toInstance<T>(owner.instance, dp, body, deadline, reqId, {
      // Alive by its heartbeats, or the roster cannot tell (its stream electing a leader):
      // maybe only moving to another NATS node (seen in the fault bench ~1.2–1.5 s after a
      // node loss), and tried again; gone if no attempt ever found it (a process just
      // killed, whose last heartbeat is still fresh), within about a second.
      noResponders: (final) =>
        final || !this.roster.mayBeAlive(owner.instance) ? this.gone(owner, reqId) : undefined,
      unreachable: (taken) => {
        this.counters.unreachable++;
        return Errors.ownerUnreachable(owner.instance, dp, reqId, taken, alive);
      },
      timeout: () =>
        Errors.deadlineExceeded(`${dp} forwarded to owner instance ${owner.instance}`, reqId),
    });
  }

  private gone(owner: Owner, reqId: string): Error {
    this.counters.ownerGone++;
    this.logger.warn({ req_id: reqId, owner: owner.instance }, 'owner instance is gone');
    return Errors.ownerGone(owner.instance, reqId);
  }
}
