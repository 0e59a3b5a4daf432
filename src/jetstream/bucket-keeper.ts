import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { BUCKET_BACKOFF, StoreConfigError, streamNotFound, untilOpen } from './bucket-settings';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { backoffMs, sleep } from '../common/backoff';
import { Clock } from '../common/clock';
import { withTimeout } from '../common/timeout';
import { NatsConnectionService } from '../transport/nats-connection.service';

/** A bucket is asked about at most this often, however many of its operations fail. */
const CHECK_MS = 1_000;
/**
 * Every kept bucket is also asked about this often, used or not: one only a shutdown
 * writes (the handoff's staged bucket) must be back before that shutdown needs it.
 */
const SWEEP_MS = 10_000;
/** The bound of one JetStream API call made here. */
const API_TIMEOUT_MS = 5_000;

interface Kept {
  stream: string;
  recreate: () => Promise<void>;
  /** Known deleted, and not made again yet. */
  missing: boolean;
  checkedAt: number;
  checking?: Promise<boolean>;
  recreated: number;
  lastError?: string;
}

export interface BucketsView {
  /** Buckets known deleted and not recreated yet: /health/ready is down meanwhile. */
  missing: string[];
  /** Recreations since start, by bucket (every bucket kept, from 0). */
  recreated: Record<string, number>;
  /** Why the last recreation attempt of a missing bucket failed. */
  errors?: Record<string, string>;
}

/**
 * The shared buckets a process uses: the metadata registry's, the roster, the cache claims
 * and the object store's two. Anyone with access to the
 * account may delete one (no roles by default); before, only the metadata bucket came
 * back, the others' writes failed for good and /health/ready stayed 200.
 *
 * Each user registers its bucket with a way to make it again with this service's settings
 * and reports failures of its operations; a failure (and a sweep every 10 s) makes the
 * keeper ask the server (at most once a second per bucket) whether the stream is still
 * there. If not, the bucket is
 * recreated (retried with backoff until it is), logged and counted, and readiness is down
 * until it is back.
 */
@Injectable()
export class BucketKeeper implements OnApplicationShutdown {
  private readonly logger = new Logger('Buckets');
  private readonly kept = new Map<string, Kept>();
  private readonly stopping = new AbortController();
  private jsm?: Promise<JetStreamManager>;
  private sweeper?: NodeJS.Timeout;
  /** The first bucket found with conflicting settings (a promise settles once: the first wins). */
  private refuseWith!: (err: StoreConfigError) => void;
  private readonly refusal = new Promise<StoreConfigError>((r) => (this.refuseWith = r));

  constructor(
    /** The connection the buckets are reached over (their users take it from here). */
    readonly nats: NatsConnectionService,
    private readonly clock: Clock,
  ) {}

  /**
   * Opens bucket `name` with `open` (openKvBucket, or the object store's), retried with the
   * one backoff until it can be or the process stops (undefined). A bucket whose settings
   * conflict with ours is refused (see refused) and undefined returned.
   */
  async open<T>(name: string, open: () => Promise<T>, logger: Logger): Promise<T | undefined> {
    try {
      return await untilOpen(open, { bucket: name, logger, signal: this.stopping.signal });
    } catch (err) {
      if (!(err instanceof StoreConfigError)) throw err;
      logger.error(err.message);
      this.refuse(err);
      return undefined;
    }
  }

  /** A bucket exists with settings that conflict with ours: the process must not serve. */
  refuse(err: StoreConfigError): void {
    this.refuseWith(err);
  }

  /**
   * Resolves with the first bucket found with conflicting settings (never while every
   * bucket agrees): main.ts exits 78 with its message. Any of the five buckets.
   */
  refused(): Promise<StoreConfigError> {
    return this.refusal;
  }

  /** `recreate`: makes the bucket again with this service's settings and reopens handles. */
  keep(name: string, stream: string, recreate: () => Promise<void>): void {
    this.kept.set(name, { stream, recreate, missing: false, checkedAt: 0, recreated: 0 });
    this.sweeper ??= setInterval(() => {
      for (const bucket of this.kept.keys()) void this.look(bucket, false);
    }, SWEEP_MS).unref();
  }

  /**
   * After an operation on bucket `name` failed: whether the bucket is gone (being made
   * again meanwhile). Asks the server at most once a second per bucket (a sweep's asking
   * does not count: the first failure after a deletion is told so). Never throws.
   */
  failed(name: string): Promise<boolean> {
    return this.look(name, true);
  }

  private async look(name: string, throttled: boolean): Promise<boolean> {
    const k = this.kept.get(name);
    if (!k || this.stopping.signal.aborted) return false;
    if (k.missing) return true;
    if (k.checking) return k.checking;
    if (throttled) {
      if (this.clock.now() - k.checkedAt < CHECK_MS) return false;
      k.checkedAt = this.clock.now();
    }
    k.checking = this.check(name, k).finally(() => (k.checking = undefined));
    return k.checking;
  }

  view(): BucketsView {
    const missing: string[] = [];
    const recreated: Record<string, number> = {};
    const errors: Record<string, string> = {};
    for (const [name, k] of this.kept) {
      recreated[name] = k.recreated;
      if (k.missing) {
        missing.push(name);
        if (k.lastError) errors[name] = k.lastError;
      }
    }
    return { missing, recreated, ...(Object.keys(errors).length ? { errors } : {}) };
  }

  onApplicationShutdown(): void {
    this.stopping.abort();
    clearInterval(this.sweeper);
  }

  private async check(name: string, k: Kept): Promise<boolean> {
    const gone = await this.manager()
      .then((jsm) =>
        withTimeout(
          jsm.streams.info(k.stream),
          API_TIMEOUT_MS,
          () => new Error(`no answer from JetStream within ${API_TIMEOUT_MS} ms`),
        ),
      )
      .then(
        () => false,
        (err: unknown) => streamNotFound(err),
      );
    if (!gone || k.missing) return gone;
    k.missing = true;
    this.logger.warn(
      { bucket: name },
      "bucket was deleted; recreating it with this service's settings",
    );
    void this.recreate(name, k);
    return true;
  }

  private async recreate(name: string, k: Kept): Promise<void> {
    for (let attempt = 1; !this.stopping.signal.aborted; attempt++) {
      try {
        await k.recreate();
        k.missing = false;
        k.lastError = undefined;
        k.recreated++;
        this.logger.warn({ bucket: name, attempts: attempt }, 'bucket recreated');
        return;
      } catch (err) {
        k.lastError = (err as Error).message;
        const delay = backoffMs(attempt, BUCKET_BACKOFF);
        if (attempt === 1) {
          this.logger.warn(
            { bucket: name, err: k.lastError },
            'bucket not recreated yet; retrying',
          );
        }
        await sleep(delay, this.stopping.signal).catch(() => undefined);
      }
    }
  }

  /** Overridden by the unit test (a fake server). */
  protected manager(): Promise<JetStreamManager> {
    this.jsm ??= this.nats
      .connection()
      .then((nc) => jetstreamManager(nc, { timeout: API_TIMEOUT_MS }))
      .catch((err: unknown) => {
        this.jsm = undefined;
        throw err;
      });
    return this.jsm;
  }
}
