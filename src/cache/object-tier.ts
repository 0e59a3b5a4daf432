import { Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { sleep } from '../common/backoff';
import { Clock } from '../common/clock';
import { LifecycleEvents } from '../common/lifecycle-events';
import { withTimeout } from '../common/timeout';
import { AppConfig } from '../config/app-config';
import { corruptObject, ObjectBuckets, type ObjectBucket } from '../jetstream/object-buckets';
import type { CacheEntry } from './embedding-cache';

/** One read never holds an encode longer than this: past it, the store is a miss. */
const READ_BOUND_MS = 2_000;
/** How often a write that waits for an idle moment looks again. */
const IDLE_POLL_MS = 10;

/** Why a read found nothing usable: absent, corrupt (checksum, layout, sizes), or a store error. */
export type ReadMiss = 'absent' | 'corrupt' | 'error';

export interface ObjectTierStats {
  enabled: boolean;
  bucket: string;
  open: boolean;
  reads: { hit: number; absent: number; corrupt: number; error: number };
  writes: { ok: number; failed: number; dropped: number };
  queued: number;
  /** Bytes of the embeddings waiting in the queue (EPD_CACHE_MAX_BYTES bounds them). */
  queued_bytes: number;
  write_queue_max: number;
  bytes_written: number;
  bytes_read: number;
}

/**
 * The cache's second level (EPD_CACHE_STORE=jetstream): cached embeddings by content key in
 * object store bucket EPD_OBJ_BUCKET, on the NATS servers the service already uses.
 * Written after an encode through a bounded queue (full: dropped and counted; an encode
 * never waits for it), read on an in-process miss. Its age and size bounds are the
 * server's (EPD_OBJ_MAX_AGE_S, EPD_OBJ_MAX_BYTES). An object that disagrees with its
 * checksum or layout is a counted miss, never served; a store that cannot be reached is a
 * miss too.
 */
@Injectable()
export class ObjectTier implements OnApplicationBootstrap {
  private readonly logger = new Logger('ObjectTier');
  readonly enabled: boolean;
  private readonly store: ObjectBucket;
  private readonly queue: CacheEntry[] = [];
  private queuedKeys = new Set<string>();
  /** Bytes of the embeddings in `queue`: at most EPD_CACHE_MAX_BYTES (see write). */
  private queuedBytes = 0;
  private writing = false;
  /** A write shifted off the queue and under way (it counts as queued until it ends). */
  private putting = false;
  private flushing = false;
  private onDrained?: () => void;
  /**
   * Whether the encode pipeline holds no request (`pipeline.pending`): writes start only
   * then. True until told (a process without a pipeline writes whenever).
   */
  private pipelineIdle = true;
  private readonly counters = {
    reads: { hit: 0, absent: 0, corrupt: 0, error: 0 },
    writes: { ok: 0, failed: 0, dropped: 0 },
    bytesWritten: 0,
    bytesRead: 0,
  };

  constructor(
    private readonly config: AppConfig,
    private readonly clock: Clock,
    buckets: ObjectBuckets,
    events: LifecycleEvents,
  ) {
    this.enabled = buckets.enabled;
    this.store = buckets.bucket({
      name: config.cache.objBucket,
      maxAgeMs: config.cache.objMaxAgeS * 1000,
      ageSetting: 'EPD_OBJ_MAX_AGE_S',
    });
    events.on('pipeline.pending', (pending) => (this.pipelineIdle = pending === 0));
  }

  get bucket(): string {
    return this.store.name;
  }

  onApplicationBootstrap(): void {
    if (this.enabled) void this.store.openUntilDone();
  }

  /** The cached entry of `key`, or why there is none; never throws, never past `deadline`. */
  async read(key: string, deadline: number): Promise<CacheEntry | ReadMiss> {
    if (!this.store.isOpen) return this.missed('error');
    const bound = Math.min(READ_BOUND_MS, deadline - this.clock.now());
    if (bound <= 0) return this.missed('error');
    try {
      const found = await this.store.read(key, bound);
      if (!found) return this.missed('absent');
      if (!found.rows) {
        this.logger.warn({ key, bucket: this.bucket }, 'corrupt object in the store: not served');
        return this.missed('corrupt');
      }
      this.counters.reads.hit++;
      this.counters.bytesRead += found.rows.bytes;
      return { key, ...found.rows, hits: 0 };
    } catch (err) {
      // Chunks or sizes that disagree are a corrupt object; anything else, the store's.
      const corrupt = corruptObject(err);
      if (!corrupt) this.logger.debug({ key, err: (err as Error).message }, 'object store read');
      return this.missed(corrupt ? 'corrupt' : 'error');
    }
  }

  private missed(why: ReadMiss): ReadMiss {
    this.counters.reads[why]++;
    return why;
  }

  /**
   * Queues `entry` to be written; with the queue full (or the store not open) it is
   * dropped and counted. Never waits. Full means EPD_OBJ_WRITE_QUEUE entries, or their
   * bytes at EPD_CACHE_MAX_BYTES: a queued entry the cache has evicted is held by the
   * queue alone, and under steady load (writes wait for an idle pipeline) 249 of them once
   * took RSS from 221 to 608 MB beside an 8 MiB cache. The queue thus holds at most the
   * cache's budget again.
   */
  write(entry: CacheEntry): void {
    if (!this.enabled) return;
    if (this.queuedKeys.has(entry.key)) return;
    if (
      !this.store.isOpen ||
      this.queue.length >= this.config.cache.objWriteQueue ||
      this.queuedBytes + entry.bytes > this.config.cache.maxBytes
    ) {
      this.counters.writes.dropped++;
      return;
    }
    this.queue.push(entry);
    this.queuedKeys.add(entry.key);
    this.queuedBytes += entry.bytes;
    if (!this.writing) void this.pump();
  }

  /** Resolves once the write queue is empty (tests, and shutdown). */
  flushed(): Promise<void> {
    this.flushing = true; // at shutdown, or for a test: write now, busy or not
    if (!this.writing && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const prev = this.onDrained;
      this.onDrained = () => {
        prev?.();
        resolve();
      };
    });
  }

  /** flushed, waited for until `deadline` (epoch ms) at most: a shutdown's budget. */
  async flushedBy(deadline: number): Promise<void> {
    await withTimeout(
      this.flushed(),
      Math.max(0, deadline - this.clock.now()),
      () => new Error('timed out'),
    ).catch(() => undefined);
  }

  private async pump(): Promise<void> {
    this.writing = true;
    try {
      while (this.queue.length > 0) {
        // Writes start only while no request is in the pipeline, so a write never takes CPU
        // from an encode; under load that never pauses, the queue fills and what does not
        // fit is dropped and counted. A write already started runs on.
        if (!this.pipelineIdle && !this.flushing) {
          await sleep(IDLE_POLL_MS);
          continue;
        }
        const entry = this.queue.shift()!;
        this.queuedKeys.delete(entry.key);
        this.queuedBytes -= entry.bytes;
        const dtype = this.config.encoder.stagingDtype;
        this.putting = true;
        try {
          await this.store.write(entry.key, { ...entry, dtype });
          this.counters.writes.ok++;
          this.counters.bytesWritten += entry.bytes;
        } catch (err) {
          this.counters.writes.failed++;
          this.logger.warn(
            { key: entry.key, bucket: this.bucket, err: (err as Error).message },
            'could not write a cached embedding to the object store',
          );
        } finally {
          this.putting = false;
        }
      }
    } finally {
      this.writing = false;
      const drained = this.onDrained;
      this.onDrained = undefined;
      drained?.();
    }
  }

  stats(): ObjectTierStats {
    const c = this.counters;
    return {
      enabled: this.enabled,
      bucket: this.bucket,
      open: this.store.isOpen,
      reads: { ...c.reads },
      writes: { ...c.writes },
      queued: this.queue.length + (this.putting ? 1 : 0),
      queued_bytes: this.queuedBytes,
      write_queue_max: this.config.cache.objWriteQueue,
      bytes_written: c.bytesWritten,
      bytes_read: c.bytesRead,
    };
  }
}
