import { performance } from 'node:perf_hooks';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Logger } from '@nestjs/common';
import { Clock } from '../common/clock';
import { LifecycleEvents } from '../common/lifecycle-events';
import { withTimeout } from '../common/timeout';
import { AppConfig } from '../config/app-config';
import { BucketKeeper } from './bucket-keeper';
import { openObjectBucket } from './bucket-settings';
import { ObjectIo } from './object-io';
import {
  bytesOf,
  chunkBytesFor,
  digestOf,
  objectMetadata,
  rowsOfObject,
  streamOf,
  type StoredRows,
} from './object-layout';

/** One JetStream API call made while opening a bucket waits at most this long. */
const API_TIMEOUT_MS = 5_000;
/** One write (put, delete) waits at most this long for JetStream. */
export const WRITE_BOUND_MS = 10_000;

/** Whether a read failed on the object itself (chunks or sizes disagree), not the store. */
export const corruptObject = (err: unknown): boolean =>
  /corrupt|digest/i.test((err as Error).message);

/** An object store bucket a feature keeps its data in, and the age its objects live. */
export interface ObjectBucketUse {
  name: string;
  maxAgeMs: number;
  /** The variable that sets `maxAgeMs`, named when an existing bucket disagrees. */
  ageSetting: string;
}

/**
 * What a read found: the object's metadata, and its rows, or undefined rows when the
 * object is not intact (checksum, layout, dtype or sizes disagree: never served).
 */
export interface FoundObject {
  rows?: StoredRows;
  meta: Record<string, string>;
}

/**
 * The object store buckets of this process (EPD_CACHE_STORE=jetstream): one handle per
 * bucket, for the feature whose data it holds (the cache's second level, the handoff's
 * staged embeddings). `enabled` is decided where the process is put together: the tier is
 * one process's, so a DP worker's supervisor has none.
 */
export class ObjectBuckets {
  private readonly logger = new Logger('ObjectStore');

  constructor(
    readonly enabled: boolean,
    private readonly config: AppConfig,
    private readonly keeper: BucketKeeper,
    private readonly clock: Clock,
    private readonly events: LifecycleEvents,
  ) {
    if (config.cache.store === 'jetstream' && !enabled) {
      this.logger.warn(
        'EPD_CACHE_STORE=jetstream is not used with EPD_DP_SIZE > 1: each DP worker keeps its cache in memory',
      );
    }
  }

  /** A handle on bucket `use.name` (opened by its `openUntilDone`, or by its first use). */
  bucket(use: ObjectBucketUse): ObjectBucket {
    return new ObjectBucket(use, this.config, this.keeper, this.clock, this.events);
  }
}

/**
 * One object store bucket: opened (created with this service's settings if missing, each
 * setting checked if not, made again if deleted), and bounded reads, writes and deletes.
 * Every object carries its metadata and a sha256 of its bytes (object-layout.ts); each
 * operation that ends is told as `object-store.op` with its seconds, and one that fails
 * makes the keeper look whether the bucket is gone.
 */
export class ObjectBucket {
  private readonly logger = new Logger('ObjectStore');
  /** Set once the bucket is open. */
  private io?: ObjectIo;
  private opening?: Promise<void>;

  constructor(
    private readonly use: ObjectBucketUse,
    private readonly config: AppConfig,
    private readonly keeper: BucketKeeper,
    private readonly clock: Clock,
    private readonly events: LifecycleEvents,
  ) {}

  get name(): string {
    return this.use.name;
  }

  get isOpen(): boolean {
    return this.io !== undefined;
  }

  /** Retried with the keeper's one backoff until open; conflicting settings are refused (exit 78). */
  async openUntilDone(): Promise<void> {
    await this.keeper.open(this.name, () => this.open(), this.logger);
  }

  /** Opens the bucket once (callers share one attempt); throws if it cannot now. */
  open(): Promise<void> {
    if (this.io) return Promise.resolve();
    this.opening ??= (async () => {
      const nc = await this.keeper.nats.connection();
      const jsm = await jetstreamManager(nc, { timeout: API_TIMEOUT_MS });
      const { objMaxBytes, objReplicas } = this.config.cache;
      const make = async () => {
        const created = await openObjectBucket(nc, jsm, {
          bucket: this.name,
          stream: streamOf(this.name),
          maxAgeMs: this.use.maxAgeMs,
          maxBytes: objMaxBytes,
          replicas: objReplicas,
          settings: `EPD_OBJ_MAX_BYTES, ${this.use.ageSetting} and EPD_OBJ_REPLICAS`,
        });
        if (created) {
          this.logger.log(
            { bucket: this.name, maxAgeMs: this.use.maxAgeMs },
            'created object store bucket',
          );
        }
      };
      await make();
      // Deleted under us: made again with the same settings (handles need no reopening).
      this.keeper.keep(this.name, streamOf(this.name), make);
      this.io = new ObjectIo(
        jetstream(nc, { timeout: API_TIMEOUT_MS }),
        jsm,
        chunkBytesFor(nc.info?.max_payload ?? 1024 * 1024),
        WRITE_BOUND_MS,
        this.config.encoder.stagingMaxBytes,
      );
      this.logger.log(
        { bucket: this.name, objMaxBytes, maxAgeMs: this.use.maxAgeMs, objReplicas },
        'object store bucket open',
      );
    })().finally(() => (this.opening = undefined));
    return this.opening;
  }

  /** Open by `deadline` (epoch ms), or an error saying it is not. */
  openBy(deadline: number): Promise<void> {
    return withTimeout(
      this.open(),
      Math.max(1, deadline - this.clock.now()),
      () => new Error(`object store bucket ${this.name} not open`),
    );
  }

  /**
   * Object `name` within `boundMs`, or undefined when it is not there. Throws when the
   * bucket is not open, the store does not answer in time, or its chunks disagree with its
   * metadata ("corrupt object").
   */
  async read(name: string, boundMs: number): Promise<FoundObject | undefined> {
    const io = this.io;
    if (!io) throw new Error(`object store bucket ${this.name} not open`);
    const started = performance.now();
    const found = await withTimeout(
      io.read(this.name, name),
      boundMs,
      () => new Error(`no answer from the object store within ${boundMs} ms`),
    ).catch((err: unknown) => {
      if (!corruptObject(err)) void this.keeper.failed(this.name); // deleted? then made again
      throw err;
    });
    this.events.emit('object-store.op', 'get', (performance.now() - started) / 1000);
    if (!found) return undefined;
    const rows = rowsOfObject(found.bytes, found.meta, this.config.encoder.stagingDtype, true);
    return { meta: found.meta ?? {}, ...(rows ? { rows } : {}) };
  }

  /**
   * Writes `rows` as object `name` within `boundMs` (WRITE_BOUND_MS at most); `extra` is
   * added to its metadata. `abandoned`: what becomes of the object if the bound passes and
   * the write lands after all ('remove': nobody will be told of it, so it must not linger).
   */
  async write(
    name: string,
    rows: StoredRows,
    extra?: Record<string, string>,
    boundMs = WRITE_BOUND_MS,
    abandoned: 'keep' | 'remove' = 'keep',
  ): Promise<void> {
    const io = this.io;
    if (!io) throw new Error(`object store bucket ${this.name} not open`);
    const started = performance.now();
    const bytes = bytesOf(rows.data);
    // Hashed once: the Object Store's digest and our metadata's checksum are the same sha256.
    const digest = digestOf(bytes);
    const writing = io.write(this.name, name, bytes, objectMetadata(rows, digest, extra), digest);
    const bound = Math.max(1, Math.min(WRITE_BOUND_MS, boundMs));
    try {
      await withTimeout(
        writing,
        bound,
        () => new Error(`no answer from the object store within ${bound} ms`),
      );
    } catch (err) {
      void this.keeper.failed(this.name); // deleted? then made again
      if (abandoned === 'remove') {
        writing.then(
          () => io.remove(this.name, name).catch(() => undefined),
          () => undefined,
        );
      }
      throw err;
    }
    this.events.emit('object-store.op', 'put', (performance.now() - started) / 1000);
  }

  /**
   * Deletes object `name`, leaving nothing of it in the stream (the library's delete keeps
   * a marker; it is purged too). True if there was one.
   */
  async remove(name: string): Promise<boolean> {
    await this.open();
    const started = performance.now();
    if (!(await this.io!.remove(this.name, name))) return false;
    this.events.emit('object-store.op', 'delete', (performance.now() - started) / 1000);
    return true;
  }
}
