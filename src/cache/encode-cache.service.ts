import type { StreamedReplies } from '../transport/streamed-replies';
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import {
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { Clock } from '../common/clock';
import { AppConfig } from '../config/app-config';
import { visionModelsOf, type VisionModelSpec } from '../config/model-dir';
import { DEFAULT_GEOMETRY } from '../common/vision-geometry';
import { ProcessRole } from '../config/process-role';
import { MetaRegistry } from '../meta-registry/meta-registry.service';
import { NatsConnectionService } from '../transport/nats-connection.service';
import { cacheFetchSubject } from '../transport/subjects';
import { cacheUnits, hintKeys, type CacheUnit, type Fingerprint } from './cache-keys';
import { CachePeer, PeerUnusable } from './cache-peer';
import { CacheClaims, type ClaimRecord } from './claims';
import { EmbeddingCache, type CacheEntry, type Flight } from './embedding-cache';
import type { ObjectTier } from './object-tier';
import { ClusterClaims } from './claims.providers';

/** What the cache says about one unit of a request. */
export type Acquired =
  /** Cached here: the rows are ready. */
  | { hit: CacheEntry }
  /** Being produced by another request of this process, or fetched from the owner elsewhere. */
  | { join: Flight; remote: boolean }
  /** This request encodes it, for everyone who joins; land it with `land()`. */
  | { own: Flight };

export interface ClusterView {
  /** Where claims live: a KV bucket, the DP supervisor, or nowhere (one process: in-process flights only). */
  claims: 'jetstream' | 'dp_supervisor' | 'in_process';
  lease_ms: number;
  /** Our claims while we encode, and our "cached here" pointers. */
  claims_in_flight: number;
  claims_cached_here: number;
  fetch_subject?: string;
  /** Rows served to joiners elsewhere, fetched from owners elsewhere, owners found unusable. */
  peer?: { served: number; fetched: number; unusable: number; serving: number };
}

/** A claim of ours while we encode: its revision, renewals, and claim operations in order. */
interface Owned {
  revision: number;
  renew?: NodeJS.Timeout;
  /** Every claim operation of this flight, one after another (claims are compare-and-set). */
  ops: Promise<unknown>;
}

/** Caller hashes remembered as lookup keys (EPD_CACHE_TRUST_CLIENT_HASH), oldest out first. */
const MAX_HINTS = 100_000;

/** Claims found unusable (owner gone, silent, or without the rows), remembered this many at most. */
const MAX_UNUSABLE = 10_000;

/**
 * The embedding cache as the encode pipeline uses it: content keys that include the model
 * (a hash of its ONNX file, read once) and the preprocessing settings, over the LRU with
 * its in-process single flight; and, when other processes may encode the same content
 * (EPD_REGISTRY_STORE=jetstream, or DP workers), single flight across them: a miss claims
 * its key (CacheClaims) before encoding, renews the claim while it works, and points it
 * at its cache afterwards; a request elsewhere that finds the claim joins it and fetches
 * the rows from the owner (CachePeer) instead of encoding them again. Off when
 * EPD_CACHE_MAX_BYTES is 0.
 */
@Injectable()
export class EncodeCache implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('EncodeCache');
  readonly store: EmbeddingCache;
  readonly claims?: CacheClaims;
  readonly peer?: CachePeer;
  private readonly modelHashes = new Map<string, Promise<string>>();
  /** Our claims in flight: the revision, renewed every third of a lease. */
  private readonly owned = new Map<string, Owned>();
  /** Our "cached here" claims, released when the entry leaves the cache. */
  private readonly pointers = new Map<string, number>();
  private readonly unusable = new Map<string, number>();
  /** Caller-hash key → content key (EPD_CACHE_TRUST_CLIENT_HASH). */
  private readonly hints = new Map<string, string>();
  private readonly at: string;

  /** Each vision model, by its file: its geometry and bounds key a vision entry when not the default's. */
  private readonly specs: Map<string, VisionModelSpec>;

  constructor(
    private readonly config: AppConfig,
    private readonly clock: Clock,
    private readonly registry: MetaRegistry,
    private readonly nats: NatsConnectionService,
    private readonly cluster: ClusterClaims,
    role: ProcessRole,
  ) {
    this.specs = new Map(visionModelsOf(config.encoder).map((m) => [m.path, m]));
    this.store = new EmbeddingCache(config.cache.maxBytes, (key) => this.dropPointer(key));
    this.at = cacheFetchSubject(config.nats.subjectPrefix, config.instance.id, role.workerRank);
    if (!this.store.enabled) return;
    this.claims = cluster.claims;
    if (this.claims) this.peer = new CachePeer(this.store, config.cache.leaseMs, clock);
  }

  get enabled(): boolean {
    return this.store.enabled;
  }

  /** Single flight across processes, for GET /admin/cache. */
  clusterView(): ClusterView {
    return {
      claims: this.claims ? this.cluster.kind : 'in_process',
      lease_ms: this.config.cache.leaseMs,
      claims_in_flight: this.owned.size,
      claims_cached_here: this.pointers.size,
      fetch_subject: this.peer ? this.at : undefined,
      ...(this.peer ? { peer: this.peer.stats } : {}),
    };
  }

  /**
   * Serves cache_fetch once NATS is reached, without holding up the start: awaited here,
   * a NATS outage at start kept HTTP from coming up at all.
   */
  onApplicationBootstrap(): void {
    if (this.peer) void this.startPeer(this.peer);
  }

  private async startPeer(peer: CachePeer): Promise<void> {
    let replies: StreamedReplies;
    try {
      replies = await this.nats.streamed();
    } catch {
      return; // shut down before NATS was ever reached
    }
    peer.serve(replies, this.at);
    await this.claims!.prepare();
    this.logger.log(
      {
        subject: this.at,
        claims: this.claims?.constructor.name,
        lease_ms: this.config.cache.leaseMs,
      },
      'embedding cache single flight across processes',
    );
  }

  beforeApplicationShutdown(): void {
    this.peer?.stop();
    for (const own of this.owned.values()) clearInterval(own.renew);
  }

  /**
   * The request's cache units; `modelPath` is the file that encodes its modality, `tenant`
   * the tenant of its req_id (none in the shared space).
   */
  async units(
    modality: string,
    items: Uint8Array[],
    modelPath: string,
    tenant?: string,
  ): Promise<CacheUnit[]> {
    return cacheUnits(await this.fingerprint(modality, modelPath, tenant), items);
  }

  /** Whether callers' hashes are lookup keys (the cache on, EPD_CACHE_TRUST_CLIENT_HASH). */
  get trustsClientHashes(): boolean {
    return this.enabled && this.config.cache.trustClientHash;
  }

  /**
   * For a cache that trustsClientHashes, and a caller's hash for every item: the lookup
   * key of each unit in `namespace`, and the cached entries when every one of them is a
   * hit (then nothing needs loading). Undefined when an item has no hash.
   */
  async hinted(
    modality: string,
    hints: (string | undefined)[],
    namespace: string,
    modelPath: string,
    tenant?: string,
  ): Promise<{ keys: string[]; hits?: CacheEntry[] } | undefined> {
    if (hints.some((h) => h === undefined)) return undefined;
    const fp = await this.fingerprint(modality, modelPath, tenant);
    const keys = hintKeys(fp, hints as string[], namespace);
    const found = keys.map((k) => this.hints.get(k));
    if (found.some((k) => k === undefined || !this.store.has(k))) return { keys };
    return { keys, hits: found.map((k) => this.store.get(k!)!) };
  }

  /** Remembers that the caller's hash key `hint` names the content key `key`. */
  alias(hint: string, key: string): void {
    this.hints.delete(hint);
    this.hints.set(hint, key);
    if (this.hints.size > MAX_HINTS) this.hints.delete(this.hints.keys().next().value!);
  }

  private async fingerprint(
    modality: string,
    modelPath: string,
    tenant?: string,
  ): Promise<Fingerprint> {
    const { minPixels, maxPixels, maxVideoFrames, stagingDtype } = this.config.encoder;
    const model = await this.modelHash(modelPath);
    const fp = { modality, model, minPixels, maxPixels, maxVideoFrames, stagingDtype, tenant };
    // A model directory's normalisation and bounds are not in the tower's bytes: they key the
    // entry too. (Only then, so the default model's keys, and the caches that hold them, stay
    // as they are.) Each model's own pixel bounds, and a video's own, where it has them.
    const spec = this.specs.get(modelPath);
    const geometry = spec?.geometry ?? DEFAULT_GEOMETRY;
    if (modality === 'audio' || geometry === DEFAULT_GEOMETRY) return fp;
    return {
      ...fp,
      geometry,
      minPixels: spec!.minPixels,
      maxPixels: spec!.maxPixels,
      ...(modality === 'video' && spec!.video ? { video: spec!.video } : {}),
    };
  }

  /**
   * A hit, a join, or ours to encode. The in-process part is synchronous (two units of one
   * request with the same key: the second joins the first); then the object store `tier`,
   * whose hit lands the flight for its joiners here; then the cluster claim, so that a key
   * the store does not have is still encoded once across processes.
   */
  async acquire(
    key: string,
    deadline: number,
    reqId: string,
    tier?: Pick<ObjectTier, 'read'>,
  ): Promise<Acquired> {
    const hit = this.store.get(key);
    if (hit) return { hit };
    const { flight, mine } = this.store.claim(key);
    if (!mine) return { join: flight, remote: false };
    if (tier) {
      const stored = await tier.read(key, deadline);
      if (typeof stored !== 'string') {
        flight.plan(stored.tokens);
        this.store.land(key, flight, stored);
        this.store.counted('store');
        return { hit: stored };
      }
    }
    if (!this.claims) {
      this.store.counted('miss');
      return { own: flight };
    }
    const unusable = this.unusable.get(key);
    const claimed = await this.claims.claim(key, this.record('encoding'), unusable);
    this.unusable.delete(key);
    if (claimed.mine) {
      this.store.counted('miss');
      if (claimed.tookOver) {
        this.store.counted('takeover');
        this.logger.log(
          { req_id: reqId, key, why: unusable === undefined ? 'lease expired' : 'owner unusable' },
          'took over a cache claim whose owner is gone',
        );
      }
      this.own(key, claimed.revision);
      return { own: flight };
    }
    this.store.counted('remote');
    const { record, revision } = claimed;
    void this.fetch(key, flight, record, revision, deadline, reqId);
    return { join: flight, remote: true };
  }

  /**
   * Ends a flight this request owns: the entry is cached and handed to its joiners, here
   * and (through the claim, now pointing at this cache) everywhere; or the failure is, and
   * the claim is released so that the next request encodes it.
   */
  land(key: string, flight: Flight, entry: CacheEntry | undefined, err?: unknown): void {
    const cached = this.store.land(key, flight, entry, err);
    const own = this.owned.get(key);
    if (!own) return;
    this.owned.delete(key);
    clearInterval(own.renew);
    // After any renewal still in flight, so that this acts on the claim's latest revision.
    own.ops = own.ops.then(async () => {
      if (!cached) return this.claims!.release(key, own.revision);
      const revision = await this.claims!.update(key, this.record('cached'), own.revision);
      // Evicted before the pointer landed: nobody should be sent here for it.
      if (revision === undefined) return;
      if (this.store.has(key)) this.pointers.set(key, revision);
      else await this.claims!.release(key, revision);
    });
  }

  private record(state: ClaimRecord['state']): ClaimRecord {
    return {
      owner: this.registry.self,
      at: this.at,
      state,
      until: this.clock.now() + this.config.cache.leaseMs,
    };
  }

  /** Keeps our claim alive while we encode; one lost renewal (taken over) ends it. */
  private own(key: string, revision: number): void {
    const own: Owned = { revision, ops: Promise.resolve() };
    this.owned.set(key, own);
    if (revision === 0) return;
    const renew = async () => {
      const next = await this.claims!.update(key, this.record('encoding'), own.revision);
      if (next === undefined) clearInterval(own.renew);
      else own.revision = next;
    };
    own.renew = setInterval(
      () => {
        own.ops = own.ops.then(renew);
      },
      Math.max(50, Math.floor(this.config.cache.leaseMs / 3)),
    );
    own.renew.unref();
  }

  /** The owner's rows into our flight (and our cache); a dead owner's claim is marked for takeover. */
  private async fetch(
    key: string,
    flight: Flight,
    record: ClaimRecord,
    revision: number,
    deadline: number,
    reqId: string,
  ): Promise<void> {
    try {
      const replies = await this.nats.streamed();
      const entry = await this.peer!.fetch(replies, record.at, key, deadline, (tokens) =>
        flight.plan(tokens),
      );
      this.store.land(key, flight, entry);
    } catch (err) {
      if (err instanceof PeerUnusable) {
        this.unusable.set(key, revision);
        if (this.unusable.size > MAX_UNUSABLE)
          this.unusable.delete(this.unusable.keys().next().value!);
        this.logger.warn(
          { req_id: reqId, key, owner: record.owner, reason: err.message },
          'cache owner unusable; taking its claim over',
        );
      }
      this.store.land(key, flight, undefined, err);
    }
  }

  private dropPointer(key: string): void {
    const revision = this.pointers.get(key);
    if (revision === undefined) return;
    this.pointers.delete(key);
    void this.claims?.release(key, revision);
  }

  private modelHash(path: string): Promise<string> {
    let hash = this.modelHashes.get(path);
    if (!hash) {
      hash = readFile(path).then((bytes) => createHash('sha256').update(bytes).digest('hex'));
      hash.catch(() => this.modelHashes.delete(path));
      this.modelHashes.set(path, hash);
    }
    return hash;
  }
}
