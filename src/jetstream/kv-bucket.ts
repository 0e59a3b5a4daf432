import type { JetStreamManager } from '@nats-io/jetstream';
import type { KV, KvWatchOptions } from '@nats-io/kv';

/** One value of a KV bucket as read or watched. */
export interface KvValue {
  readonly key: string;
  readonly value: Uint8Array;
  readonly revision: number;
  /** A put, or a delete or purge marker. */
  readonly operation: 'PUT' | 'DEL' | 'PURGE';
  readonly created: Date;
}

/** A watched value: also whether it was put after the watch began (not replayed from before). */
export interface KvChange extends KvValue {
  readonly isUpdate: boolean;
}

/** A watch of a bucket: its values as they are put, until stopped. */
export interface KvChanges extends AsyncIterable<KvChange> {
  stop(): void;
}

/**
 * A KV bucket opened by this folder (openKvBucket), as the feature that owns its data uses
 * it: reads, writes with or without an expected revision, a watch, its size, and a purge
 * of one key that leaves no marker. Nothing else of the client library reaches features.
 */
export class KvBucket {
  constructor(
    readonly name: string,
    private readonly kv: KV,
    private readonly jsm: JetStreamManager,
  ) {}

  get(key: string): Promise<KvValue | null> {
    return this.kv.get(key);
  }

  put(key: string, value: string | Uint8Array): Promise<number> {
    return this.kv.put(key, value);
  }

  /** Writes `key` only if it holds nothing (compare-and-set on absence). */
  create(key: string, value: string | Uint8Array): Promise<number> {
    return this.kv.create(key, value);
  }

  /** Writes `key` only if its last revision is `revision` (compare-and-set). */
  update(key: string, value: string | Uint8Array, revision: number): Promise<number> {
    return this.kv.update(key, value, revision);
  }

  /** Deletes `key` (a marker stays until the bucket's max age). */
  delete(key: string): Promise<void> {
    return this.kv.delete(key);
  }

  watch(opts?: Pick<KvWatchOptions, 'ignoreDeletes' | 'resumeFromRevision' | 'include'>) {
    return this.kv.watch(opts) as Promise<KvChanges>;
  }

  /** Values held, and when the oldest was stored (epoch ms; undefined when empty). */
  async size(): Promise<{ values: number; oldestAt?: number }> {
    const status = await this.kv.status();
    const first = status.streamInfo.state.first_ts;
    return {
      values: status.values,
      ...(status.values > 0 && first ? { oldestAt: new Date(first).getTime() } : {}),
    };
  }

  /**
   * Removes `key`'s messages up to `revision` with a stream purge (a put that lands after
   * it survives): unlike a KV delete or purge, no marker is left to count against the
   * bucket's message cap until it ages out.
   */
  async purge(key: string, revision: number): Promise<void> {
    await this.jsm.streams.purge(`KV_${this.name}`, {
      filter: `$KV.${this.name}.${key}`,
      seq: revision + 1,
    });
  }
}
