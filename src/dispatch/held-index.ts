import type { StoredMeta } from '../meta-registry/meta-store';
import { isErrorMeta } from '../meta-registry/meta.schema';

/**
 * Which req_ids each worker process (by pid) holds an embedding for, from the records it
 * publishes: a staged (or staging) record adds, an {error} record or a delete removes.
 * Entries older than the registry TTL are dropped as new ones come, so the index never
 * outgrows what the registry itself can hold, even if a delete is never seen.
 */
export class HeldIndex {
  private readonly byPid = new Map<number, Map<string, number>>();

  constructor(private readonly ttlMs: number) {}

  record(pid: number, record: Pick<StoredMeta, 'reqId' | 'metadata'>, now: number): void {
    const held = this.of(pid);
    held.delete(record.reqId);
    if (!isErrorMeta(record.metadata)) held.set(record.reqId, now);
    for (const [reqId, at] of held) {
      if (now - at < this.ttlMs) break; // insertion order is time order
      held.delete(reqId);
    }
  }

  remove(pid: number, reqId: string): void {
    this.byPid.get(pid)?.delete(reqId);
  }

  /** What a process held, forgotten as it is returned (it died). */
  take(pid: number): string[] {
    const held = this.byPid.get(pid);
    this.byPid.delete(pid);
    return held ? [...held.keys()] : [];
  }

  get size(): number {
    let n = 0;
    for (const m of this.byPid.values()) n += m.size;
    return n;
  }

  private of(pid: number): Map<string, number> {
    let held = this.byPid.get(pid);
    if (!held) this.byPid.set(pid, (held = new Map<string, number>()));
    return held;
  }
}
