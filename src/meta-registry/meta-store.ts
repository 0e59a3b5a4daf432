import type { MetaPayload } from './meta.schema';

export interface StoredMeta {
  reqId: string;
  partIdx?: number;
  metadata: MetaPayload;
  /** Epoch ms of the last write; the TTL counts from here. */
  publishedAt: number;
}

export interface StoreStats {
  entries: number;
  oldestPublishedAt?: number;
}

/**
 * Where published metadata lives: the DI token for the pluggable store. The registry
 * owns the waiting (per-req_id subjects); a store only keeps records and their TTL.
 * Implementations: in-memory (default), and later NATS JetStream KV.
 */
export abstract class MetaStore {
  abstract get(reqId: string): Promise<StoredMeta | undefined>;
  /** Last write wins. Rejects with a 507 MMError when the store is at its bound. */
  abstract put(record: StoredMeta): Promise<void>;
  abstract delete(reqId: string): Promise<boolean>;
  /** Drops records published before `cutoff`, returning their req_ids. */
  abstract expire(cutoff: number): Promise<string[]>;
  abstract stats(): Promise<StoreStats>;
}
