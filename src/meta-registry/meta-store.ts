import type { Observable } from 'rxjs';
import type { MetaPayload } from './meta.schema';

/**
 * The instance (and, with DP, the rank) that holds a request's staged embedding, and the
 * process: its boot id (a restarted process does not hold its predecessor's embeddings)
 * and, for a DP worker, its pid (how its supervisor knows a respawned rank).
 */
export interface Owner {
  instance: string;
  rank?: number;
  pid?: number;
  boot?: string;
  /**
   * Set when the instance handed the embedding to the cluster at shutdown: it lives in this
   * object store bucket, and the first instance a call for it reaches takes it over.
   */
  store?: string;
}

export interface StoredMeta {
  reqId: string;
  partIdx?: number;
  metadata: MetaPayload;
  /** Epoch ms of the last write; the TTL counts from here. */
  publishedAt: number;
  /** Set by the encoder that staged the embedding: calls for it are routed there. */
  owner?: Owner;
}

/**
 * A compare-and-set's outcome: written (`was`: the record it replaced), or not, with what
 * is stored instead (if anything).
 */
export type Claim = { won: true; was: StoredMeta } | { won: false; now?: StoredMeta };

export interface StoreStats {
  entries: number;
  oldestPublishedAt?: number;
  /** A shared store's local state: records mirrored, deletes remembered, purges pending. */
  shared?: { mirror: number; tombstones: number; purging: number };
}

/**
 * Where published metadata lives: the DI token for the pluggable store. The registry
 * owns the waiting (per-req_id subjects); a store only keeps records and their TTL.
 * Implementations: in-memory (default, one process), and NATS JetStream KV (shared).
 */
export abstract class MetaStore {
  /**
   * Records put by any process sharing this store, as they land (a private store has
   * none: its puts are all this process's own, and the registry sees those directly).
   */
  readonly changes?: Observable<StoredMeta>;

  /** Resolves once the store is usable; rejects with StoreConfigError if it never can be. */
  ready(): Promise<void> {
    return Promise.resolve();
  }

  abstract get(reqId: string): Promise<StoredMeta | undefined>;
  /**
   * The record as the store holds it now. `get` may answer from what this process has
   * seen (a shared store's mirror, which can lag other processes' writes by seconds under
   * load); this never does. For decisions a stale answer would get wrong.
   */
  latest(reqId: string): Promise<StoredMeta | undefined> {
    return this.get(reqId);
  }
  /**
   * Last write wins. Rejects with a 507 MMError when the store is at its bound. A shared
   * store may send the write again until `deadline` (epoch ms) while it cannot take it.
   */
  abstract put(record: StoredMeta, deadline?: number): Promise<void>;
  abstract delete(reqId: string): Promise<boolean>;
  /**
   * Replaces the record stored now with `change(now)`, unless that is undefined (refused)
   * or nothing is stored: a compare-and-set (on the key's revision, in a shared store), so
   * that of two processes claiming one record, one wins and the other is told what it
   * lost to.
   */
  abstract claim(
    reqId: string,
    change: (now: StoredMeta) => StoredMeta | undefined,
  ): Promise<Claim>;
  /** Drops records published before `cutoff`, returning their req_ids. */
  abstract expire(cutoff: number): Promise<string[]>;
  abstract stats(): Promise<StoreStats>;
}
