import { LifecycleEvents } from '../common/lifecycle-events';
import { BucketKeeper } from '../jetstream/bucket-keeper';
import { performance } from 'node:perf_hooks';
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { sleep } from '../common/backoff';
import { Clock } from '../common/clock';
import { withTimeout } from '../common/timeout';
import { AppConfig } from '../config/app-config';
import { ProcessRole } from '../config/process-role';
import { openObjectBucket } from '../jetstream/bucket-settings';
import { NatsConnectionService } from '../transport/nats-connection.service';
import type { CacheEntry } from './embedding-cache';
import { ObjectIo } from '../jetstream/object-io';
import {
  bytesOf,
  chunkBytesFor,
  digestOf,
  objectMetadata,
  rowsOfObject,
  streamOf,
  type StoredRows,
} from '../jetstream/object-layout';

export type { StoredRows } from '../jetstream/object-layout';

/** One read never holds an encode longer than this: past it, the store is a miss. */
const READ_BOUND_MS = 2_000;
/** One write (put, delete) waits at most this long for JetStream. */
const WRITE_BOUND_MS = 10_000;
const API_TIMEOUT_MS = 5_000;
/** How often a write that waits for an idle moment looks again. */
const IDLE_POLL_MS = 10;

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

/** Why a read found nothing usable: absent, corrupt (checksum, layout, sizes), or a store error. */
export type ReadMiss = 'absent' | 'corrupt' | 'error';

export interface ObjectTierStats {
  enabled: boolean;
  bucket: string;
  staged_bucket: string;
  open: boolean;
  reads: { hit: number; absent: number; corrupt: number; error: number };
  writes: { ok: number; failed: number; dropped: number };
  queued: number;
  /** Bytes of the embeddings waiting in the queue (EPD_CACHE_MAX_BYTES bounds them). */
  queued_bytes: number;
  write_queue_max: number;
  bytes_written: number;
  bytes_read: number;
  staged: { written: number; failed: number; read: number; deleted: number };
}

/**
 * The JetStream Object Store tier (EPD_CACHE_STORE=jetstream), on the NATS servers the
 * service already uses: two buckets, opened (created if missing, checked if not) at start.
 * - EPD_OBJ_BUCKET: cached embeddings by content key. Written after an encode through a
 *   bounded queue (full: dropped and counted; an encode never waits for it), read on an
 *   in-process miss. Its age and size bounds are the server's (EPD_OBJ_MAX_AGE_S,
 *   EPD_OBJ_MAX_BYTES).
 * - <EPD_OBJ_BUCKET>_staged: staged embeddings handed to the cluster at shutdown, by
 *   req_id, with their delivery state; they live EPD_SEND_TIMEOUT_MS, as the metadata does,
 *   and are deleted when the req_id is released.
 * Every object carries its metadata and a sha256 of its bytes: an object that disagrees is
 * a counted miss, never served. A store that cannot be reached is a miss too.
 */
@Injectable()
export class ObjectTier implements OnApplicationBootstrap {
  private readonly logger = new Logger('ObjectTier');
  readonly enabled: boolean;
  private opening?: Promise<void>;
  /** Set once both buckets are open. */
  private io?: ObjectIo;
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
    staged: { written: 0, failed: 0, read: 0, deleted: 0 },
  };

  constructor(
    private readonly config: AppConfig,
    private readonly nats: NatsConnectionService,
    private readonly clock: Clock,
    role: ProcessRole,
    private readonly buckets: BucketKeeper,
    /** Told how long each store operation took (`object-store.op`). */
    private readonly events: LifecycleEvents,
  ) {
    // A DP worker's supervisor owns the NATS side; the tier is one process's (EPD_DP_SIZE 1).
    this.enabled = config.cache.store === 'jetstream' && role.single;
    events.on('pipeline.pending', (pending) => (this.pipelineIdle = pending === 0));
    if (config.cache.store === 'jetstream' && !role.single) {
      this.logger.warn(
        'EPD_CACHE_STORE=jetstream is not used with EPD_DP_SIZE > 1: each DP worker keeps its cache in memory',
      );
    }
  }

  get bucket(): string {
    return this.config.cache.objBucket;
  }

  get stagedBucket(): string {
    return `${this.config.cache.objBucket}_staged`;
  }

  onApplicationBootstrap(): void {
    if (this.enabled) void this.openLoop();
  }

  /** Both buckets, retried until they open; a conflict of settings is refused (exit 78). */
  private async openLoop(): Promise<void> {
    await this.buckets.open(this.bucket, () => this.open(), this.logger);
  }

  private open(): Promise<void> {
    if (this.io) return Promise.resolve();
    this.opening ??= (async () => {
      const nc = await this.nats.connection();
      const jsm = await jetstreamManager(nc, { timeout: API_TIMEOUT_MS });
      const { objMaxBytes, objMaxAgeS, objReplicas } = this.config.cache;
      const both: [string, number, string][] = [
        [this.bucket, objMaxAgeS * 1000, 'EPD_OBJ_MAX_AGE_S'],
        [this.stagedBucket, this.config.timeouts.sendTimeoutMs, 'EPD_SEND_TIMEOUT_MS'],
      ];
      for (const [name, maxAgeMs, setting] of both) {
        await this.bucketOf(nc, jsm, name, maxAgeMs, setting);
        // Deleted under us: made again with the same settings (handles need no reopening).
        this.buckets.keep(name, streamOf(name), () =>
          this.bucketOf(nc, jsm, name, maxAgeMs, setting),
        );
      }
      this.io = new ObjectIo(
        jetstream(nc, { timeout: API_TIMEOUT_MS }),
        jsm,
        chunkBytesFor(nc.info?.max_payload ?? 1024 * 1024),
        WRITE_BOUND_MS,
        this.config.encoder.stagingMaxBytes,
      );
      this.logger.log(
        { bucket: this.bucket, staged: this.stagedBucket, objMaxBytes, objMaxAgeS, objReplicas },
        'object store tier open',
      );
    })().finally(() => (this.opening = undefined));
    return this.opening;
  }

  /** The buckets open by `deadline` (epoch ms), or an error saying they are not. */
  private openBy(deadline: number): Promise<void> {
    return withTimeout(
      this.open(),
      Math.max(1, deadline - this.clock.now()),
      () => new Error('object store not open'),
    );
  }

  /** One bucket, created with our settings if missing; an existing one must have them. */
  private async bucketOf(
    nc: NatsConnection,
    jsm: JetStreamManager,
    name: string,
    maxAgeMs: number,
    ageSetting: string,
  ): Promise<void> {
    const { objMaxBytes, objReplicas } = this.config.cache;
    const created = await openObjectBucket(nc, jsm, {
      bucket: name,
      stream: streamOf(name),
      maxAgeMs,
      maxBytes: objMaxBytes,
      replicas: objReplicas,
      settings: `EPD_OBJ_MAX_BYTES, ${ageSetting} and EPD_OBJ_REPLICAS`,
    });
    if (created) this.logger.log({ bucket: name, maxAgeMs }, 'created object store bucket');
  }

  // --- Cached embeddings --------------------------------------------------------------

  /** The cached entry of `key`, or why there is none; never throws, never past `deadline`. */
  async read(key: string, deadline: number): Promise<CacheEntry | ReadMiss> {
    if (!this.io) return this.missed('error');
    const bound = Math.min(READ_BOUND_MS, deadline - this.clock.now());
    if (bound <= 0) return this.missed('error');
    const started = performance.now();
    try {
      const found = await withTimeout(
        this.io.read(this.bucket, key),
        bound,
        () => new Error(`no answer from the object store within ${bound} ms`),
      );
      this.events.emit('object-store.op', 'get', (performance.now() - started) / 1000);
      if (!found) return this.missed('absent');
      const rows = rowsOfObject(found.bytes, found.meta, this.config.encoder.stagingDtype, true);
      if (!rows) {
        this.logger.warn({ key, bucket: this.bucket }, 'corrupt object in the store: not served');
        return this.missed('corrupt');
      }
      this.counters.reads.hit++;
      this.counters.bytesRead += rows.bytes;
      return { key, ...rows, hits: 0 };
    } catch (err) {
      // Chunks or sizes that disagree (ObjectIo) are a corrupt object; anything else, the store's.
      const corrupt = /corrupt|digest/i.test((err as Error).message);
      if (!corrupt) {
        this.logger.debug({ key, err: (err as Error).message }, 'object store read');
        void this.buckets.failed(this.bucket); // deleted? then made again
      }
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
      !this.io ||
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
          await this.put(this.bucket, entry.key, { ...entry, dtype });
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

  /**
   * Writes one object (ObjectIo) within `boundMs`. `abandoned`: what to do with the object
   * if the bound passes and the write lands after all (a handed-off embedding nobody will
   * be told of must not linger); its chunks are purged if it fails.
   */
  private async put(
    bucket: string,
    name: string,
    rows: StoredRows,
    extra?: Record<string, string>,
    boundMs = WRITE_BOUND_MS,
    abandoned: 'keep' | 'remove' = 'keep',
  ): Promise<void> {
    const started = performance.now();
    const bytes = bytesOf(rows.data);
    // Hashed once: the Object Store's digest and our metadata's checksum are the same sha256.
    const digest = digestOf(bytes);
    const writing = this.io!.write(
      bucket,
      name,
      bytes,
      objectMetadata(rows, digest, extra),
      digest,
    );
    try {
      await withTimeout(
        writing,
        boundMs,
        () => new Error(`no answer from the object store within ${boundMs} ms`),
      );
    } catch (err) {
      void this.buckets.failed(bucket); // deleted? then made again
      if (abandoned === 'remove') {
        writing.then(
          () => this.io!.remove(bucket, name).catch(() => undefined),
          () => undefined,
        );
      }
      throw err;
    }
    this.events.emit('object-store.op', 'put', (performance.now() - started) / 1000);
  }

  // --- Staged embeddings handed over at shutdown --------------------------------------

  /**
   * Writes one staged embedding and its delivery state by `until` (epoch ms); throws when
   * it could not. A write that lands after `until` is deleted: nobody will take it over.
   */
  async handOff(staged: HandedOff, until: number): Promise<void> {
    await this.openBy(until);
    try {
      await this.put(
        this.stagedBucket,
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
        Math.max(1, Math.min(WRITE_BOUND_MS, until - this.clock.now())),
        'remove',
      );
      this.counters.staged.written++;
      this.counters.bytesWritten += staged.bytes;
    } catch (err) {
      this.counters.staged.failed++;
      throw err;
    }
  }

  /** A handed-off embedding, or undefined when it is not (or no longer, or not intact) there. */
  async takeOver(reqId: string, deadline: number): Promise<HandedOff | undefined> {
    await this.openBy(deadline);
    const bound = Math.max(1, deadline - this.clock.now());
    const started = performance.now();
    const found = await withTimeout(
      this.io!.read(this.stagedBucket, reqId),
      bound,
      () => new Error(`no answer from the object store within ${bound} ms`),
    ).catch((err: unknown) => {
      void this.buckets.failed(this.stagedBucket); // deleted? then made again
      throw err;
    });
    this.events.emit('object-store.op', 'get', (performance.now() - started) / 1000);
    if (!found) return undefined;
    const rows = rowsOfObject(found.bytes, found.meta, this.config.encoder.stagingDtype, true);
    const m = found.meta ?? {};
    if (!rows || m.kind !== 'staged') {
      this.counters.reads.corrupt++;
      this.logger.warn({ req_id: reqId, bucket: this.stagedBucket }, 'corrupt handed-off object');
      return undefined;
    }
    let acked: string[] = [];
    try {
      const parsed = JSON.parse(m.acked ?? '[]') as unknown;
      if (Array.isArray(parsed)) acked = parsed.filter((a): a is string => typeof a === 'string');
    } catch {
      // none counted
    }
    this.counters.staged.read++;
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

  /**
   * Deletes a handed-off embedding, leaving nothing behind in the stream (the library's
   * delete keeps a marker; it is purged too). True if there was one.
   */
  async release(reqId: string): Promise<boolean> {
    await this.open();
    const started = performance.now();
    if (!(await this.io!.remove(this.stagedBucket, reqId))) return false;
    this.counters.staged.deleted++;
    this.events.emit('object-store.op', 'delete', (performance.now() - started) / 1000);
    return true;
  }

  stats(): ObjectTierStats {
    const c = this.counters;
    return {
      enabled: this.enabled,
      bucket: this.bucket,
      staged_bucket: this.stagedBucket,
      open: this.io !== undefined,
      reads: { ...c.reads },
      writes: { ...c.writes },
      queued: this.queue.length + (this.putting ? 1 : 0),
      queued_bytes: this.queuedBytes,
      write_queue_max: this.config.cache.objWriteQueue,
      bytes_written: c.bytesWritten,
      bytes_read: c.bytesRead,
      staged: { ...c.staged },
    };
  }
}
