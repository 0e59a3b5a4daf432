import { Errors } from '../common/errors/error-catalogue';
import { MetaStore, type Claim, type StoreStats, type StoredMeta } from './meta-store';

/**
 * A Map kept in publish order (a re-publish moves the key to the end), so the oldest
 * record is always first: the TTL sweep stops at the first live record and `stats` finds
 * the oldest age in O(1).
 */
export class MemoryMetaStore extends MetaStore {
  private readonly records = new Map<string, StoredMeta>();

  constructor(private readonly maxEntries: number) {
    super();
  }

  override get(reqId: string): Promise<StoredMeta | undefined> {
    return Promise.resolve(this.records.get(reqId));
  }

  override put(record: StoredMeta): Promise<void> {
    const existed = this.records.delete(record.reqId);
    if (!existed && this.records.size >= this.maxEntries) {
      return Promise.reject(Errors.registryFull(this.maxEntries, record.reqId));
    }
    this.records.set(record.reqId, record);
    return Promise.resolve();
  }

  /** One process's store: the read and the write happen in one turn of the event loop. */
  override async claim(
    reqId: string,
    change: (now: StoredMeta) => StoredMeta | undefined,
  ): Promise<Claim> {
    const now = this.records.get(reqId);
    const next = now && change(now);
    if (!next) return { won: false, now };
    await this.put(next); // a subclass's put (the DP worker mirrors it to its supervisor)
    return { won: true, was: now };
  }

  override delete(reqId: string): Promise<boolean> {
    return Promise.resolve(this.records.delete(reqId));
  }

  override expire(cutoff: number): Promise<string[]> {
    const expired: string[] = [];
    for (const [reqId, record] of this.records) {
      if (record.publishedAt >= cutoff) break;
      this.records.delete(reqId);
      expired.push(reqId);
    }
    return Promise.resolve(expired);
  }

  override stats(): Promise<StoreStats> {
    const oldest = this.records.values().next();
    return Promise.resolve({
      entries: this.records.size,
      oldestPublishedAt: oldest.done ? undefined : oldest.value.publishedAt,
    });
  }
}
