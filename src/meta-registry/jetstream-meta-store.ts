import { Clock } from '../common/clock';
import { Logger, type OnApplicationShutdown } from '@nestjs/common';
import { Subject, type Subscription } from 'rxjs';
import { backoffMs, sleep } from '../common/backoff';
import { withTimeout } from '../common/timeout';
import { Errors } from '../common/errors/error-catalogue';
import { MMError } from '../common/errors/mm-error';
import type { AppConfig } from '../config/app-config';
import type { BucketKeeper } from '../jetstream/bucket-keeper';
import type { NatsConnectionService } from '../transport/nats-connection.service';
import { decodeRecord, encodeRecord, keyOf } from './kv-codec';
import { KvMirror } from './kv-mirror';
import { KeyPurges } from './kv-purges';
import { KvWatch } from './kv-watch';
import { lostCompareAndSet } from '../jetstream/compare-and-set';
import { openKvBucket, untilOpen } from '../jetstream/bucket-settings';
import type { KvBucket, KvValue } from '../jetstream/kv-bucket';
import { MetaStore, type Claim, type StoreStats, type StoredMeta } from './meta-store';

const STORE = 'jetstream';
/** A JetStream API call's own bound; a wait is bounded by its deadline as well. */
const API_TIMEOUT_MS = 5_000;
/**
 * One attempt of a put made with a deadline, or of a purge: the stream's leader normally
 * answers in milliseconds; an attempt with no answer in this long is sent again.
 */
const ATTEMPT_MS = 1_000;
/** Compare-and-set attempts of one claim (each failure means another writer got there). */
const CLAIM_ATTEMPTS = 4;
/**
 * How long a put with a deadline waits for NATS to reconnect: what moving to another node
 * of the cluster takes. Past it, NATS is down, and calls fail at once with 503.
 */
const RECONNECT_GRACE_MS = 3_000;

/**
 * The registry's records in a JetStream KV bucket (EPD_REGISTRY_STORE=jetstream), shared
 * by every instance on the NATS cluster and kept across restarts.
 *
 * - Keys: kv-codec.ts (any req_id, reversibly). Values: the record as JSON, with its owner.
 * - TTL: the bucket's max age is EPD_SEND_TIMEOUT_MS (nats-server 2.9 has no per-message
 *   TTL), so the server expires entries; `expire()` only ages out the mirror below.
 * - Bound: the stream's max_msgs is EPD_REGISTRY_MAX_ENTRIES with discard-new, so a put
 *   beyond it is refused (507) cluster-wide, as the memory store does per process.
 * - One watcher per process (`changes`), from the last revision it saw after a reconnect
 *   or a lost consumer, so no put is missed; the registry wakes only that key's waiters.
 * - The watcher also keeps a mirror of the puts it has seen, and this process's own writes
 *   enter it at once, so a read of a key published since this process started is answered
 *   from memory; anything else is read from the bucket. A delete purges the key's messages
 *   up to the revision it read (no marker: counts stay exact) and tells every instance on
 *   `_EPD.<bucket>.evict`, with that revision, so no mirror keeps it or takes it back from
 *   a late watcher echo. The mirror is dropped whenever something could have been missed
 *   (a disconnect, a new watcher).
 * - NATS down: every call fails at once with 503 naming the store, never at a deadline.
 * - A node loss: the bucket's R3 stream accepts no write until its replicas elect a new
 *   leader (nats-server waits 4–9 s for that; measured 3.3–5.4 s here), and a write in
 *   that window gets no answer or "jetstream is not enabled". A put made with a deadline
 *   (an encode's metadata) is sent again until it lands or the deadline is near. A delete
 *   takes effect at once (the key reads as absent on every instance, through the evict
 *   broadcast on core NATS, which needs no leader); its purge is awaited for up to
 *   ATTEMPT_MS, then goes on in the background until the stream accepts it: a release
 *   never waits for an election.
 */
export class JetStreamMetaStore extends MetaStore implements OnApplicationShutdown {
  private readonly logger = new Logger('JetStreamMetaStore');
  override readonly changes = new Subject<StoredMeta>();
  private kv?: KvBucket;
  private opening?: Promise<KvBucket>;
  /** The process's one watcher of the bucket (kv-watch.ts). */
  private readonly watch: KvWatch;
  /** What the watcher has seen, and the keys deleted (kv-mirror.ts). */
  private readonly mirror: KvMirror;
  /** Deletes whose purge the stream has not accepted yet. */
  private readonly purges: KeyPurges;
  /** Since when NATS is not connected (undefined: it is). */
  private disconnectedAt?: number;
  private closed = false;
  private connectionStates?: Subscription;
  private readonly stopping = new AbortController();
  private readyResolve!: () => void;
  private readyReject!: (err: Error) => void;
  private readonly readyPromise = new Promise<void>((resolve, reject) => {
    this.readyResolve = resolve;
    this.readyReject = reject;
  });

  constructor(
    /** Made again after a deletion by the keeper, as every bucket is; NATS through it. */
    private readonly keeper: BucketKeeper,
    private readonly config: AppConfig,
    private readonly clock: Clock,
  ) {
    super();
    this.mirror = new KvMirror(clock, config.timeouts.sendTimeoutMs);
    this.purges = new KeyPurges(
      (key, revision) => this.purgeKey(key, revision),
      this.stopping.signal,
      this.logger,
    );
    this.watch = new KvWatch(this.mirror, this.changes, this.logger, this.stopping.signal);
    // Unobserved until main.ts (or a test) asks: a config error must not be unhandled.
    this.readyPromise.catch(() => undefined);
    // Disconnected, the watcher may miss deletes: forget the mirror, read the bucket.
    this.connectionStates = this.nats.states.subscribe((state) => {
      if (state === 'connected') {
        this.disconnectedAt = undefined;
        return;
      }
      this.disconnectedAt ??= this.clock.now();
      this.mirror.forget();
    });
    void this.start();
  }

  override ready(): Promise<void> {
    return this.readyPromise;
  }

  get bucketName(): string {
    return this.config.registry.kvBucket;
  }

  private get nats(): NatsConnectionService {
    return this.keeper.nats;
  }

  /**
   * Opens the bucket once NATS is up (it may not be at start; JetStream may come later
   * too), then watches it. Settings that conflict with an existing bucket are final.
   */
  private async start(): Promise<void> {
    try {
      const kv = await untilOpen(() => this.bucket(), {
        bucket: this.bucketName,
        logger: this.logger,
        signal: this.stopping.signal,
      });
      if (!kv) return; // stopped first
      this.keeper.keep(this.bucketName, `KV_${this.bucketName}`, () => this.recreate());
    } catch (err) {
      // Settings that conflict with the existing bucket: final (main.ts exits 78).
      this.logger.error((err as Error).message);
      this.readyReject(err as Error);
      return;
    }
    if (this.closed) return;
    const nc = await this.nats.connection();
    // Deletes made by any instance (this one's own included, already applied).
    nc.subscribe(this.evictSubject, {
      callback: (err, msg) => (err ? this.mirror.forget() : this.mirror.evictTold(msg.string())),
    });
    await this.watch.run(
      () => this.bucket(),
      () => this.readyResolve(),
      () => this.keeper.failed(this.bucketName),
    );
  }

  /** The bucket, created if missing, its settings checked against ours. */
  private async bucket(): Promise<KvBucket> {
    if (this.kv) return this.kv;
    this.opening ??= this.open().finally(() => (this.opening = undefined));
    return this.opening;
  }

  private async open(): Promise<KvBucket> {
    const nc = await this.nats.connection();
    const { kvBucket, kvReplicas, maxEntries } = this.config.registry;
    const ttl = this.config.timeouts.sendTimeoutMs;
    const { kv, created } = await openKvBucket(nc, {
      bucket: kvBucket,
      ttlMs: ttl,
      replicas: kvReplicas,
      history: 1,
      maxEntries,
      what: 'metadata registry',
      settings: 'EPD_SEND_TIMEOUT_MS, EPD_KV_REPLICAS and EPD_REGISTRY_MAX_ENTRIES',
    });
    if (created)
      this.logger.log({ bucket: kvBucket, ttlMs: ttl, replicas: kvReplicas }, 'created KV bucket');
    this.kv = kv;
    return kv;
  }

  /**
   * The bucket for a call, or a fast 503: NATS not connected, or the store not started
   * yet (a read before the watcher runs could miss a put that lands in between).
   */
  private connected(reqId?: string): KvBucket {
    if (this.closed) throw Errors.shuttingDown(reqId);
    const state = this.nats.state;
    if (state !== 'connected') throw Errors.storeUnavailable(STORE, `NATS is ${state}`, reqId);
    if (!this.kv || !this.watch.watching) {
      throw Errors.storeUnavailable(STORE, `KV bucket ${this.bucketName} is not open yet`, reqId);
    }
    return this.kv;
  }

  /**
   * One store operation, bounded whatever the client library does with a request in
   * flight when a server dies (measured: JetStream calls caught by a node kill waited
   * their full API timeout): the caller's answer never waits on it past API_TIMEOUT_MS,
   * and any failure that is not already an MMError is a 503 naming the store.
   */
  private async call<T>(op: Promise<T>, reqId?: string, boundMs = API_TIMEOUT_MS): Promise<T> {
    try {
      return await withTimeout(op, boundMs, () =>
        Errors.storeUnavailable(STORE, `no answer from JetStream within ${boundMs} ms`, reqId),
      );
    } catch (err) {
      if (err instanceof MMError) throw err;
      if (await this.keeper.failed(this.bucketName)) {
        throw Errors.storeUnavailable(
          STORE,
          `KV bucket ${this.bucketName} was deleted; recreating it`,
          reqId,
        );
      }
      throw Errors.storeUnavailable(STORE, (err as Error).message, reqId);
    }
  }

  /**
   * The bucket was deleted (by anyone on the account, without NATS roles): calls get a 503
   * that says so until it is made again with this service's settings, and the watcher
   * starts again from its first revision. Retried by the keeper until it succeeds.
   */
  private async recreate(): Promise<void> {
    this.kv = undefined;
    this.watch.reset();
    this.mirror.reset();
    await this.bucket();
    // The watch loop starts a new watcher on the new bucket.
    this.watch.stop();
  }

  override async get(reqId: string): Promise<StoredMeta | undefined> {
    this.connected(reqId); // NATS down: 503 at once, even for what the mirror holds
    const since = this.clock.now() - this.config.timeouts.sendTimeoutMs;
    return this.mirror.recent(reqId, since) ?? this.latest(reqId);
  }

  override async latest(reqId: string): Promise<StoredMeta | undefined> {
    const kv = this.connected(reqId);
    return this.recordOf(reqId, await this.call(kv.get(keyOf(reqId)), reqId));
  }

  /** A bucket entry's record: none for a delete, or for a put this process deleted. */
  private recordOf(reqId: string, entry: KvValue | null): StoredMeta | undefined {
    if (entry?.operation !== 'PUT') return undefined;
    // Deleted, and its purge not landed yet (or this read raced it): absent.
    if (this.mirror.isDeleted(reqId, entry.revision)) return undefined;
    return decodeRecord(reqId, entry.value);
  }

  /**
   * Read from the bucket (never the mirror, which may lag), then written with the revision
   * read as the expected last one: a write by anyone in between makes the server refuse
   * ours, and the record is read again (a few times: each refusal means another writer
   * made progress).
   */
  override async claim(
    reqId: string,
    change: (now: StoredMeta) => StoredMeta | undefined,
  ): Promise<Claim> {
    const key = keyOf(reqId);
    for (let attempt = 1; attempt <= CLAIM_ATTEMPTS; attempt++) {
      const kv = this.connected(reqId);
      const entry = await this.call(kv.get(key), reqId);
      const now = this.recordOf(reqId, entry);
      const next = now && change(now);
      if (!next) return { won: false, now };
      const written = kv.update(key, encodeRecord(next), entry!.revision).then(
        (revision) => {
          this.mirror.wrote(reqId, revision, next);
          return true;
        },
        (err: unknown) => {
          if (lostCompareAndSet(err)) return false;
          throw err;
        },
      );
      if (await this.call(written, reqId)) return { won: true, was: now };
    }
    throw Errors.storeUnavailable(
      STORE,
      `the record changed under each of ${CLAIM_ATTEMPTS} compare-and-set attempts`,
      reqId,
    );
  }

  /**
   * With a `deadline`, an attempt that gets no answer within ATTEMPT_MS, finds the stream
   * without a leader, or finds NATS reconnecting (for up to RECONNECT_GRACE_MS), is sent
   * again while the deadline leaves time for one: a put is idempotent (the same record
   * under the same key). A bucket at its bound (507) is final at once, and so is NATS down
   * for longer than the grace.
   */
  override async put(record: StoredMeta, deadline?: number): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        // NATS reconnecting (this instance's node lost) is worth the wait as well.
        const kv = this.connected(record.reqId);
        const left = deadline === undefined ? API_TIMEOUT_MS : deadline - this.clock.now();
        const put = kv.put(keyOf(record.reqId), encodeRecord(record)).catch((err: Error) => {
          if (!/maximum messages/i.test(err.message)) throw err;
          throw Errors.registryFull(this.config.registry.maxEntries, record.reqId);
        });
        const bound = Math.max(1, Math.min(left, ATTEMPT_MS));
        // Read back at once by this process (KvMirror.wrote), not only after the echo.
        this.mirror.wrote(record.reqId, await this.call(put, record.reqId, bound), record);
        return;
      } catch (err) {
        const retry = backoffMs(attempt, { baseMs: 100, maxMs: 500, jitter: 0.5 });
        const down =
          this.disconnectedAt !== undefined &&
          this.clock.now() - this.disconnectedAt > RECONNECT_GRACE_MS;
        const again =
          deadline !== undefined &&
          err instanceof MMError &&
          err.type === 'store_unavailable' &&
          !this.closed &&
          !down &&
          deadline - this.clock.now() > retry + 50;
        if (!again) throw err;
        if (attempt === 1) {
          this.logger.warn(
            { req_id: record.reqId, err: err.message },
            'metadata put not accepted (stream leader lost?); sending it again until the deadline',
          );
        }
        await sleep(retry, this.stopping.signal).catch(() => undefined);
      }
    }
  }

  /**
   * A stream purge of the key's messages up to the revision read (a put that lands in
   * between survives), not a KV delete or purge: those leave a marker that counts against
   * the bucket's message cap until it ages out. Then every mirror is told.
   */
  override async delete(reqId: string): Promise<boolean> {
    const kv = this.connected(reqId);
    const key = keyOf(reqId);
    const present = await this.call(kv.get(key), reqId);
    if (present?.operation !== 'PUT') return false;
    if (this.mirror.isDeleted(reqId, present.revision)) return false;
    this.mirror.evict(reqId, present.revision);
    this.nats.current?.publish(
      this.evictSubject,
      JSON.stringify({ key, revision: present.revision }),
    );
    // Normally the stream takes the purge in milliseconds, and the bucket's count is exact
    // when the call returns. Without a leader it answers nothing: the purge goes on in the
    // background, and the caller is answered within ATTEMPT_MS.
    const landed = await this.purgeKey(key, present.revision, reqId).then(
      () => true,
      () => false,
    );
    if (!landed) this.purges.later(key, present.revision);
    return true;
  }

  /** One purge of `key`'s messages up to `revision`, bounded by ATTEMPT_MS. */
  private async purgeKey(key: string, revision: number, reqId?: string): Promise<void> {
    await this.call(this.connected(reqId).purge(key, revision), reqId, ATTEMPT_MS);
  }

  private get evictSubject(): string {
    return `_EPD.${this.bucketName}.evict`;
  }

  /**
   * The bucket's max age expires entries on the server; here only the mirror ages out
   * (oldest first, as the memory store does) and tombstones the watcher never passed.
   */
  override expire(cutoff: number): Promise<string[]> {
    this.mirror.expire(cutoff);
    return Promise.resolve([]);
  }

  /** Mirror, tombstone and pending-purge sizes, for tests and the admin view. */
  get cached(): { mirror: number; tombstones: number; purging: number } {
    return { ...this.mirror.sizes, purging: this.purges.size };
  }

  override async stats(): Promise<StoreStats> {
    const { values, oldestAt } = await this.call(this.connected().size());
    return { entries: values, oldestPublishedAt: oldestAt, shared: this.cached };
  }

  onApplicationShutdown(): void {
    this.closed = true;
    this.connectionStates?.unsubscribe();
    this.stopping.abort();
    this.watch.stop();
    this.changes.complete();
  }
}
