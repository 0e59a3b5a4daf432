import type { Owner } from '../meta-registry/meta-store';
import type { IpcTopic } from '../transport/ipc-topics';

/**
 * Who encodes (or holds) the embedding of one cache key, as recorded for every process
 * that may want it: `encoding` while the owner works (its lease runs to `until`, epoch ms,
 * and is renewed), `cached` once its cache holds the rows (valid while it answers).
 */
export interface ClaimRecord {
  owner: Owner;
  /** The owner's NATS subject for fetching the rows (cacheFetchSubject). */
  at: string;
  state: 'encoding' | 'cached';
  until: number;
}

/**
 * The answer to a claim: this caller's (`mine`, at `revision`; revision 0 when the claim
 * could not be recorded and the item is encoded without single flight; `tookOver` when
 * it replaced a dead owner's), or another owner's live claim to join.
 */
export type Claimed =
  | { mine: true; revision: number; tookOver?: boolean }
  | { mine: false; revision: number; record: ClaimRecord };

/**
 * Cluster-wide single flight for the embedding cache: one owner per key at a time.
 * Implementations: a JetStream KV bucket (EPD_REGISTRY_STORE=jetstream: every instance
 * and rank), the DP supervisor's memory (its workers, over IPC). A single process on the
 * memory store needs none: its in-process flights are the whole cluster.
 */
export abstract class CacheClaims {
  /**
   * Claims `key` for `record` (create-if-absent), or takes it over when the claim there is
   * dead: an `encoding` lease past its `until`, or the revision the caller found unusable
   * (`unusable`: the owner was gone, silent, or no longer had it). Otherwise returns the
   * live claim to join.
   */
  abstract claim(key: string, record: ClaimRecord, unusable?: number): Promise<Claimed>;

  /** Replaces our claim at `revision` (a renewal, or encoding → cached): its new revision, or undefined if it is not ours any more. */
  abstract update(key: string, record: ClaimRecord, revision: number): Promise<number | undefined>;

  /** Drops our claim if it is still at `revision`. */
  abstract release(key: string, revision: number): Promise<void>;

  /** Opens what the claims live in ahead of the first claim (a failure is only logged). */
  prepare(): Promise<void> {
    return Promise.resolve();
  }
}

/** Whether a claim found at `revision` may be taken over. */
export function isDead(
  record: ClaimRecord,
  revision: number,
  now: number,
  unusable?: number,
): boolean {
  return revision === unusable || (record.state === 'encoding' && record.until < now);
}

/**
 * Claims in one process's memory: the DP supervisor's, shared by its workers over IPC
 * (EPD_REGISTRY_STORE=memory). At most `maxClaims`; a claim beyond that is not recorded.
 * A worker's claims go with it when it dies (`dropPid`), so nobody waits on them.
 */
export class MemoryClaims extends CacheClaims {
  private readonly claims = new Map<string, { record: ClaimRecord; revision: number }>();
  private revision = 0;

  constructor(
    private readonly maxClaims: number,
    private readonly now: () => number,
  ) {
    super();
  }

  get size(): number {
    return this.claims.size;
  }

  claim(key: string, record: ClaimRecord, unusable?: number): Promise<Claimed> {
    const held = this.claims.get(key);
    if (held && !isDead(held.record, held.revision, this.now(), unusable)) {
      return Promise.resolve({ mine: false, revision: held.revision, record: held.record });
    }
    if (!held && this.claims.size >= this.maxClaims) {
      return Promise.resolve({ mine: true, revision: 0 });
    }
    const revision = ++this.revision;
    this.claims.set(key, { record, revision });
    return Promise.resolve({ mine: true, revision, tookOver: held !== undefined });
  }

  update(key: string, record: ClaimRecord, revision: number): Promise<number | undefined> {
    if (this.claims.get(key)?.revision !== revision) return Promise.resolve(undefined);
    const next = ++this.revision;
    this.claims.set(key, { record, revision: next });
    return Promise.resolve(next);
  }

  release(key: string, revision: number): Promise<void> {
    if (this.claims.get(key)?.revision === revision) this.claims.delete(key);
    return Promise.resolve();
  }

  /** Every claim of the process `pid` (a DP worker that died). */
  dropPid(pid: number): number {
    let n = 0;
    for (const [key, { record }] of this.claims) {
      if (record.owner.pid === pid) {
        this.claims.delete(key);
        n++;
      }
    }
    return n;
  }
}

/** The IPC request a DP worker sends its supervisor for each claim operation. */
export type ClaimCall =
  | { op: 'claim'; key: string; record: ClaimRecord; unusable?: number }
  | { op: 'update'; key: string; record: ClaimRecord; revision: number }
  | { op: 'release'; key: string; revision: number };

/** Serves one ClaimCall on `claims` (the supervisor's side of the IPC). */
export function serveClaimCall(claims: CacheClaims, call: ClaimCall): Promise<ClaimReply> {
  switch (call.op) {
    case 'claim':
      return claims.claim(call.key, call.record, call.unusable);
    case 'update':
      return claims.update(call.key, call.record, call.revision);
    case 'release':
      return claims.release(call.key, call.revision).then(() => null);
  }
}

/** What the supervisor answers a ClaimCall: by op, as CacheClaims returns it. */
export type ClaimReply = Claimed | number | undefined | null;

declare module '../transport/ipc-topics' {
  interface IpcTopics {
    /** Worker → supervisor: one claim operation of the cache's single flight. */
    claims: IpcTopic<ClaimCall, ClaimReply>;
  }
}
