import { BucketKeeper } from '../jetstream/bucket-keeper';
import { Clock } from '../common/clock';
import { Logger } from '@nestjs/common';
import { lostCompareAndSet } from '../jetstream/compare-and-set';
import { openKvBucket, StoreConfigError } from '../jetstream/bucket-settings';
import type { KvBucket } from '../jetstream/kv-bucket';
import { withTimeout } from '../common/timeout';
import { CacheClaims, isDead, type ClaimRecord, type Claimed } from './claims';

/** A JetStream API call's own bound: a claim never holds an encode longer than this. */
const API_TIMEOUT_MS = 2_000;
/** Leftover claims (of an instance that died holding them) age out of the bucket after this. */
const CLAIM_MAX_AGE_MS = 3_600_000;
/** Create/take-over races lost in a row before encoding without a recorded claim. */
const MAX_RACES = 4;

const keyOf = (cacheKey: string) => `k.${cacheKey}`;

function decode(value: Uint8Array): ClaimRecord | undefined {
  try {
    const r = JSON.parse(Buffer.from(value).toString('utf8')) as ClaimRecord;
    return typeof r?.owner?.instance === 'string' &&
      typeof r.at === 'string' &&
      typeof r.until === 'number'
      ? r
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Claims in the JetStream KV bucket `<EPD_KV_BUCKET>_claims`, shared by every instance and
 * rank on the NATS cluster (EPD_REGISTRY_STORE=jetstream).
 *
 * - claim = KV create (create-if-absent); a takeover = KV update at the revision read, so
 *   of two takers exactly one wins and the other joins it.
 * - release = a stream purge of the key up to our revision: no delete marker to count
 *   against the bucket's cap, and a newer owner's claim survives it.
 * - Bounds: EPD_CACHE_MAX_CLAIMS messages (discard new: a claim beyond it is not recorded,
 *   and that item is encoded without single flight); claims age out after an hour.
 * - Never fails an encode: NATS or JetStream trouble means "encode it here, unrecorded".
 */
export class KvClaims extends CacheClaims {
  private readonly logger = new Logger('KvClaims');
  private kv?: KvBucket;
  private opening?: Promise<KvBucket>;
  private lastWarnAt = 0;

  constructor(
    private readonly buckets: BucketKeeper,
    readonly bucketName: string,
    private readonly opts: { replicas: number; maxClaims: number },
    private readonly clock: Clock,
  ) {
    super();
    // Deleted under us: made again (with the cap) by the same open as at start.
    buckets.keep(bucketName, `KV_${bucketName}`, async () => {
      this.kv = undefined;
      await this.bucket();
    });
  }

  async claim(key: string, record: ClaimRecord, unusable?: number): Promise<Claimed> {
    try {
      const kv = await this.bucket();
      const value = JSON.stringify(record);
      for (let race = 0; race < MAX_RACES; race++) {
        try {
          return { mine: true, revision: await this.call(kv.create(keyOf(key), value)) };
        } catch (err) {
          if (!lostCompareAndSet(err)) throw err;
        }
        const held = await this.call(kv.get(keyOf(key)));
        const current = held?.operation === 'PUT' ? decode(held.value) : undefined;
        if (!held || !current) continue; // released meanwhile, or not one of ours: create again
        if (!isDead(current, held.revision, this.clock.now(), unusable)) {
          return { mine: false, revision: held.revision, record: current };
        }
        try {
          const revision = await this.call(kv.update(keyOf(key), value, held.revision));
          return { mine: true, revision, tookOver: true };
        } catch (err) {
          if (!lostCompareAndSet(err)) throw err;
        }
      }
      this.warn('lost every race for a claim', key);
    } catch (err) {
      this.warn((err as Error).message, key);
    }
    return { mine: true, revision: 0 };
  }

  async update(key: string, record: ClaimRecord, revision: number): Promise<number | undefined> {
    if (revision === 0) return undefined;
    try {
      const kv = await this.bucket();
      return await this.call(kv.update(keyOf(key), JSON.stringify(record), revision));
    } catch (err) {
      if (!lostCompareAndSet(err)) this.warn((err as Error).message, key);
      return undefined;
    }
  }

  async release(key: string, revision: number): Promise<void> {
    if (revision === 0) return;
    try {
      const kv = await this.bucket();
      await this.call(kv.purge(keyOf(key), revision));
    } catch (err) {
      this.warn((err as Error).message, key);
    }
  }

  override async prepare(): Promise<void> {
    await this.bucket().catch((err: Error) => {
      if (err instanceof StoreConfigError) {
        this.logger.error(err.message);
        this.buckets.refuse(err); // the process refuses to start (main.ts: exit 78)
      } else this.warn(err.message, '(open)');
    });
  }

  private call<T>(op: Promise<T>): Promise<T> {
    return withTimeout(
      op,
      API_TIMEOUT_MS,
      () => new Error(`no answer from JetStream within ${API_TIMEOUT_MS} ms`),
    );
  }

  private bucket(): Promise<KvBucket> {
    if (this.kv) return Promise.resolve(this.kv);
    this.opening ??= this.open().finally(() => (this.opening = undefined));
    return this.opening;
  }

  /**
   * The claims bucket, created with our settings if missing (or by a peer at the same
   * moment); an existing one with other settings is refused (exit 78).
   */
  private async open(): Promise<KvBucket> {
    const nc = await this.buckets.nats.connection();
    const { kv, created } = await openKvBucket(nc, {
      bucket: this.bucketName,
      ttlMs: CLAIM_MAX_AGE_MS,
      replicas: this.opts.replicas,
      history: 1,
      maxEntries: this.opts.maxClaims,
      what: 'cache claims',
      settings: 'EPD_KV_REPLICAS and EPD_CACHE_MAX_CLAIMS',
    });
    if (created) this.logger.log({ bucket: this.bucketName }, 'created the cache claims bucket');
    this.kv = kv;
    return kv;
  }

  /** At most one warning a minute: a NATS outage must not flood the log. */
  private warn(reason: string, key: string): void {
    void this.buckets.failed(this.bucketName); // deleted? then made again
    const now = this.clock.now();
    if (now - this.lastWarnAt < 60_000) return;
    this.lastWarnAt = now;
    this.logger.warn(
      { bucket: this.bucketName, key, reason },
      'cache claim not recorded; encoding without cluster-wide single flight',
    );
  }
}
