import type { Clock } from '../common/clock';
import { decodeRecord, reqIdOf } from './kv-codec';
import type { StoredMeta } from './meta-store';

/** Deleted keys remembered (their revision): the most recent ones when there are more. */
export const MAX_TOMBSTONES = 10_000;

/**
 * What one process's watcher has seen of the metadata bucket: the records put since it
 * started (a read of one is answered from memory), and tombstones of the keys deleted, so
 * that neither a read that raced the delete's purge nor a late watcher echo brings a
 * deleted record back. Both bounded: the mirror by the records' age, the tombstones by
 * MAX_TOMBSTONES and the records' TTL.
 */
export class KvMirror {
  /** Seen records, oldest first (a re-put moves to the end). */
  private readonly records = new Map<string, { record: StoredMeta; revision: number }>();
  /**
   * Deleted keys: the revision deleted and until when it is remembered. A read, or a late
   * watcher echo, of that revision or an older one finds nothing; a newer put ends it.
   */
  private readonly deleted = new Map<string, { revision: number; until: number }>();

  constructor(
    private readonly clock: Clock,
    /** A record's TTL (EPD_SEND_TIMEOUT_MS): how long a tombstone is kept. */
    private readonly ttlMs: number,
  ) {}

  /** The record of `reqId` seen, if it was published at `since` (epoch ms) or later. */
  recent(reqId: string, since: number): StoredMeta | undefined {
    const seen = this.records.get(reqId);
    return seen && seen.record.publishedAt >= since ? seen.record : undefined;
  }

  /** Whether revision `revision` of `reqId` was deleted here (it reads as absent). */
  isDeleted(reqId: string, revision: number): boolean {
    return revision <= (this.deleted.get(reqId)?.revision ?? 0);
  }

  /**
   * Forgets `reqId` up to `revision`: reads and watcher echoes of it or anything older find
   * nothing until the record's max age has passed (its purge may land later than this).
   */
  evict(reqId: string, revision: number): void {
    const seen = this.records.get(reqId);
    if (seen && seen.revision <= revision) this.records.delete(reqId);
    if (this.isDeleted(reqId, revision)) return;
    this.deleted.delete(reqId);
    this.deleted.set(reqId, { revision, until: this.clock.now() + this.ttlMs });
    // Bounded: the oldest tombstones go first.
    if (this.deleted.size > MAX_TOMBSTONES) this.deleted.delete(this.deleted.keys().next().value!);
  }

  /** A delete another instance told (`{ key, revision }` on the evict subject); else ignored. */
  evictTold(text: string): void {
    try {
      const { key, revision } = JSON.parse(text) as { key: unknown; revision: unknown };
      const reqId = typeof key === 'string' ? reqIdOf(key) : undefined;
      if (reqId !== undefined && Number.isInteger(revision)) this.evict(reqId, revision as number);
    } catch {
      // not ours
    }
  }

  /**
   * One watched entry: the record it puts (to announce to the waiters), or undefined for a
   * delete, a late echo of a deleted put, or a value that is not a record.
   */
  apply(
    reqId: string,
    revision: number,
    operation: string,
    value: Uint8Array,
  ): StoredMeta | undefined {
    if (!this.newer(reqId, revision)) return undefined;
    if (operation !== 'PUT') {
      this.records.delete(reqId);
      return undefined;
    }
    const record = decodeRecord(reqId, value);
    if (record) this.keep(reqId, revision, record);
    return record;
  }

  /**
   * A write of this process that the bucket accepted at `revision`: read back at once, not
   * only once the watcher echoes it (until then, a read got the record before it: a claim
   * read back as still handed off, an unclaim as still claimed). A newer revision seen or
   * deleted here wins.
   */
  wrote(reqId: string, revision: number, record: StoredMeta): void {
    if (this.newer(reqId, revision)) this.keep(reqId, revision, record);
  }

  /**
   * Whether `revision` of `reqId` is news: not a deleted put echoed late (a newer one ends
   * the tombstone), nor older than the record held (one this process wrote itself while
   * the watcher is behind).
   */
  private newer(reqId: string, revision: number): boolean {
    if (this.isDeleted(reqId, revision)) return false;
    this.deleted.delete(reqId);
    return revision >= (this.records.get(reqId)?.revision ?? 0);
  }

  /** Holds `record`, newest last (the order expire() walks). */
  private keep(reqId: string, revision: number, record: StoredMeta): void {
    this.records.delete(reqId);
    this.records.set(reqId, { record, revision });
  }

  /** Drops every record seen: reads go to the bucket until the watcher refills it. */
  forget(): void {
    this.records.clear();
  }

  /** The bucket was made again (revisions start over): records and tombstones go. */
  reset(): void {
    this.records.clear();
    this.deleted.clear();
  }

  /** Records published before `cutoff` leave (oldest first), and tombstones past their time. */
  expire(cutoff: number): void {
    for (const [reqId, { record }] of this.records) {
      if (record.publishedAt >= cutoff) break;
      this.records.delete(reqId);
    }
    const now = this.clock.now();
    for (const [reqId, { until }] of this.deleted) {
      if (until > now) break; // oldest first: the rest are younger
      this.deleted.delete(reqId);
    }
  }

  get sizes(): { mirror: number; tombstones: number } {
    return { mirror: this.records.size, tombstones: this.deleted.size };
  }
}
