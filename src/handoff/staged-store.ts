import { Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { Clock } from '../common/clock';
import { AppConfig } from '../config/app-config';
import { ObjectBuckets, WRITE_BOUND_MS, type ObjectBucket } from '../jetstream/object-buckets';
import type { StoredRows } from '../jetstream/object-layout';

/** A staged embedding handed to the cluster at shutdown: its rows and its delivery state. */
export interface HandedOff extends StoredRows {
  reqId: string;
  modality: string;
  partIdx: number;
  numParts: number;
  receiveCount?: number;
  /** Destinations (`host:port`) that acked before the handoff: counted, not sent again. */
  acked: string[];
}

export interface StagedStoreStats {
  bucket: string;
  open: boolean;
  /** Objects written by this process's drain, and writes that failed (reported lost). */
  written: number;
  failed: number;
  /** Objects read here to take one over; found corrupt (not served); deleted. */
  read: number;
  corrupt: number;
  deleted: number;
  bytes_written: number;
  bytes_read: number;
}

/**
 * The handoff's bucket, `<EPD_OBJ_BUCKET>_staged`: staged embeddings handed to the cluster
 * at shutdown, by req_id, with their delivery state. They live EPD_SEND_TIMEOUT_MS, as the
 * metadata does, and are deleted when the req_id is released. Used only when the handoff
 * is on (the object store tier with a shared metadata registry).
 */
@Injectable()
export class StagedStore implements OnApplicationBootstrap {
  private readonly logger = new Logger('Handoff');
  readonly enabled: boolean;
  private readonly store: ObjectBucket;
  private readonly counters = {
    written: 0,
    failed: 0,
    read: 0,
    corrupt: 0,
    deleted: 0,
    bytesWritten: 0,
    bytesRead: 0,
  };

  constructor(
    config: AppConfig,
    private readonly clock: Clock,
    buckets: ObjectBuckets,
  ) {
    this.enabled = buckets.enabled && config.registry.store === 'jetstream';
    this.store = buckets.bucket({
      name: `${config.cache.objBucket}_staged`,
      maxAgeMs: config.timeouts.sendTimeoutMs,
      ageSetting: 'EPD_SEND_TIMEOUT_MS',
    });
  }

  get bucket(): string {
    return this.store.name;
  }

  onApplicationBootstrap(): void {
    if (this.enabled) void this.store.openUntilDone();
  }

  /**
   * Writes one staged embedding and its delivery state by `until` (epoch ms); throws when
   * it could not. A write that lands after `until` is deleted: nobody will take it over.
   */
  async handOff(staged: HandedOff, until: number): Promise<void> {
    try {
      await this.store.openBy(until);
      await this.store.write(
        staged.reqId,
        staged,
        {
          kind: 'staged',
          modality: staged.modality,
          part_idx: String(staged.partIdx),
          num_parts: String(staged.numParts),
          ...(staged.receiveCount !== undefined
            ? { receive_count: String(staged.receiveCount) }
            : {}),
          acked: JSON.stringify(staged.acked),
        },
        Math.min(WRITE_BOUND_MS, until - this.clock.now()),
        'remove',
      );
      this.counters.written++;
      this.counters.bytesWritten += staged.bytes;
    } catch (err) {
      this.counters.failed++;
      throw err;
    }
  }

  /** A handed-off embedding, or undefined when it is not (or no longer, or not intact) there. */
  async takeOver(reqId: string, deadline: number): Promise<HandedOff | undefined> {
    await this.store.openBy(deadline);
    const found = await this.store.read(reqId, Math.max(1, deadline - this.clock.now()));
    if (!found) return undefined;
    const { rows, meta: m } = found;
    if (!rows || m.kind !== 'staged') {
      this.counters.corrupt++;
      this.logger.warn({ req_id: reqId, bucket: this.bucket }, 'corrupt handed-off object');
      return undefined;
    }
    let acked: string[] = [];
    try {
      const parsed = JSON.parse(m.acked ?? '[]') as unknown;
      if (Array.isArray(parsed)) acked = parsed.filter((a): a is string => typeof a === 'string');
    } catch {
      // none counted
    }
    this.counters.read++;
    this.counters.bytesRead += rows.bytes;
    return {
      ...rows,
      reqId,
      modality: m.modality ?? 'image',
      partIdx: Number(m.part_idx ?? 0),
      numParts: Number(m.num_parts ?? 1),
      ...(m.receive_count !== undefined ? { receiveCount: Number(m.receive_count) } : {}),
      acked,
    };
  }

  /** Deletes a handed-off embedding, leaving nothing of it in the stream. True if there was one. */
  async release(reqId: string): Promise<boolean> {
    if (!(await this.store.remove(reqId))) return false;
    this.counters.deleted++;
    return true;
  }

  stats(): StagedStoreStats {
    const c = this.counters;
    return {
      bucket: this.bucket,
      open: this.store.isOpen,
      written: c.written,
      failed: c.failed,
      read: c.read,
      corrupt: c.corrupt,
      deleted: c.deleted,
      bytes_written: c.bytesWritten,
      bytes_read: c.bytesRead,
    };
  }
}
