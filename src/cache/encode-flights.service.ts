import { Injectable, Logger } from '@nestjs/common';
import { MMError } from '../common/errors/mm-error';
import { tenantOf } from '../common/tenant';
import type { CacheEntry, Flight } from './embedding-cache';
import { EncodeCache } from './encode-cache.service';
import { ObjectTier } from './object-tier';

/** The fields of an encode request the cache reads (docs/contract.md §2). */
export interface CacheableRequest {
  req_id: string;
  modality: string;
  mm_items: readonly { content_hash?: string }[];
  hashes?: unknown;
  cache_namespace?: string;
}

/** Rows in the staging dtype: a Float32Array (fp32) or the bits of bf16/fp16. */
export type Rows = Float32Array | Uint16Array;

/** A share of the request: one image, or a whole video or audio request (see cacheUnits). */
interface Unit {
  key: string;
  items: number[];
  tokens?: number;
  /** From the cache. */
  hit?: CacheEntry;
  /** Being encoded by another request of this process, or by another process (`remote`). */
  join?: Flight;
  remote?: boolean;
  /** Being encoded by this request, for its joiners too. */
  own?: Flight;
  entry?: CacheEntry;
}

/**
 * A unit this request joined failed in the request that was encoding it, for a reason of
 * that request (released, out of budget, its own limits, deadline): this one encodes it
 * itself instead. A failure of the media itself (MEDIA_FAILURES) is everyone's, and is
 * thrown as it is.
 */
class JoinedFailed extends Error {
  constructor(readonly error: unknown) {
    super('a joined unit failed');
  }
}

/**
 * Failures of the media itself: the same bytes fail the same way for every request, so a
 * joiner takes the owner's. Anything else (the owner's own limits, release, deadline, a
 * 5xx) was the owner request's, and the joiner encodes the unit itself.
 */
const MEDIA_FAILURES = new Set(['load_failed', 'process_failed', 'invalid_request']);

/** Attempts of one request while units it joined fail for their owners' reasons. */
const MAX_ATTEMPTS = 3;

async function joined<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (err) {
    if (err instanceof MMError && MEDIA_FAILURES.has(err.type)) throw err;
    throw new JoinedFailed(err);
  }
}

function concat(parts: Rows[]): Rows {
  const total = parts.reduce((n, p) => n + p.length, 0);
  // The parts' own constructor: rows that came from a worker thread may belong to another
  // realm (a test runner's), where `instanceof Float32Array` is false.
  const Ctor = parts[0]!.constructor as new (n: number) => Rows;
  const out = new Ctor(total);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** How the cache served a request's units, for its reply's timings. */
export interface ClaimCounts {
  cache_hits: number;
  cache_joins: number;
  cache_remote_joins: number;
}

/**
 * One request's share of the single flight: which items it encodes itself (`items`),
 * and, for the rest, rows that come from the cache or from the request (here or in
 * another process) that encodes them. The pipeline plans and forwards `items`, tells the
 * claim their tokens (`planned`) and rows (`land`), and reads every unit's rows back in
 * item order (`rows`). Without the cache, the request is one unit of its own.
 */
export class Claim {
  /** Item indices this request encodes itself, in order. */
  readonly items: number[];
  private readonly mine: Unit[];

  constructor(
    private readonly units: Unit[],
    private readonly modality: string,
    private readonly cache: EncodeCache,
    private readonly tier?: ObjectTier,
  ) {
    this.mine = units.filter((u) => !u.hit && !u.join);
    this.items = this.mine.flatMap((u) => u.items);
  }

  /**
   * The tokens of `items`: `total`, and per item (images, audio clips) or one entry for a
   * video. Call it before any wait: two requests that joined each other both proceed.
   */
  planned(total: number, itemTokens: number[]): void {
    let k = 0;
    for (const u of this.mine) {
      u.tokens = this.mine.length === 1 ? total : itemTokens[k++]!;
      u.own?.plan(u.tokens);
    }
  }

  /** The request's tokens, once every unit it joined knows its own. */
  async tokens(): Promise<number> {
    for (const u of this.units) if (u.join) u.tokens = await joined(u.join.planned);
    return this.units.reduce((n, u) => n + u.tokens!, 0);
  }

  /**
   * The forward's rows for `items`, cut into this request's units: cached, and handed to
   * the requests that joined them. Before the caller's release check: joiners get the rows
   * even when this request was released meanwhile.
   */
  land(out: Rows, dim: number, grids: number[][]): void {
    let row = 0;
    let item = 0;
    for (const u of this.mine) {
      const rows = u.tokens! * dim;
      // One unit owns the whole output; several get their own copies, so that a cached
      // entry never keeps a larger buffer alive than it accounts for.
      const data = this.mine.length === 1 ? out : out.slice(row, row + rows);
      const grid = this.modality === 'image' ? grids.slice(item, item + u.items.length) : grids;
      u.entry = { key: u.key, data, tokens: u.tokens!, dim, grid, bytes: data.byteLength, hits: 0 };
      if (u.own) {
        this.cache.land(u.key, u.own, u.entry);
        // Encoded here: into the object store too, off the hot path (a full queue drops it).
        this.tier?.write(u.entry);
      }
      row += rows;
      item += u.items.length;
    }
  }

  /** Every unit's rows in item order, and their grids; waits for the units it joined. */
  async rows(): Promise<{ data: Rows; grid: number[][] }> {
    for (const u of this.units) if (u.join) u.entry = await joined(u.join.done);
    const entries = this.units.map((u) => u.entry!);
    return {
      data: entries.length === 1 ? entries[0]!.data : concat(entries.map((e) => e.data)),
      grid: entries.flatMap((e) => e.grid),
    };
  }

  /** Ends every flight this request owns and has not landed, with `err`, for its joiners. */
  fail(err: unknown): void {
    for (const u of this.mine) if (u.own && !u.entry) this.cache.land(u.key, u.own, undefined, err);
  }

  counts(): ClaimCounts | undefined {
    if (!this.cache.enabled) return undefined;
    return {
      cache_hits: this.units.filter((u) => u.hit).length,
      cache_joins: this.units.filter((u) => u.join).length,
      cache_remote_joins: this.units.filter((u) => u.remote).length,
    };
  }
}

/** Caller hashes as lookup keys, and the entries when every item is a hit. */
export interface Hinted {
  keys: string[];
  hits?: CacheEntry[];
}

/**
 * The cache's single flight as the encode pipeline sees it: a request's units are hits,
 * joins of an encode under way (here or in another process), or its own to encode; `run`
 * claims them, hands the claim to the pipeline, lands what the pipeline did not, and
 * encodes again, at most twice, a unit whose owner failed for its own reasons.
 */
@Injectable()
export class EncodeFlights {
  private readonly logger = new Logger('EncodeFlights');

  /** The object store tier behind the cache, when it is on (EPD_CACHE_STORE=jetstream). */
  private readonly tier?: ObjectTier;

  constructor(
    private readonly cache: EncodeCache,
    tier: ObjectTier,
  ) {
    if (tier.enabled && cache.enabled) this.tier = tier;
  }

  get enabled(): boolean {
    return this.cache.enabled;
  }

  /**
   * With EPD_CACHE_TRUST_CLIENT_HASH: the caller's hash of each item (its `content_hash`,
   * else SGLang's `hashes`: a list with one per item, or a scalar for a single item) as
   * lookup keys in its `cache_namespace`. When every one is a hit, nothing needs loading.
   */
  async hinted(
    req: CacheableRequest,
    modelPath: () => Promise<string>,
  ): Promise<Hinted | undefined> {
    if (!this.cache.trustsClientHashes) return undefined;
    const list: unknown[] = Array.isArray(req.hashes)
      ? req.hashes
      : req.hashes == null
        ? []
        : [req.hashes];
    const hashes = list.length === req.mm_items.length ? list : [];
    const hints = req.mm_items.map((item, i) => {
      if (item.content_hash) return item.content_hash.replace(/^sha256:/i, '').toLowerCase();
      const h = hashes[i];
      return typeof h === 'string' || typeof h === 'number' ? String(h) : undefined;
    });
    const namespace = req.cache_namespace ?? '';
    const tenant = tenantOf(req.req_id);
    return this.cache.hinted(req.modality, hints, namespace, await modelPath(), tenant);
  }

  /**
   * Claims the request's units (all hits when `hinted` found every one), runs `encode`
   * with the claim, and fails the flights it left unlanded. A unit joined from a request
   * that failed for its own reasons is claimed again, so this request encodes it.
   */
  async run<T>(
    req: CacheableRequest,
    items: Uint8Array[],
    deadline: number,
    modelPath: () => Promise<string>,
    hinted: Hinted | undefined,
    encode: (claim: Claim) => Promise<T>,
  ): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const claim = hinted?.hits
        ? this.hitClaim(req, hinted.hits)
        : await this.claim(req, items, deadline, modelPath, hinted?.keys);
      try {
        return await encode(claim);
      } catch (err) {
        claim.fail(err);
        if (!(err instanceof JoinedFailed)) throw err;
        if (attempt >= MAX_ATTEMPTS) throw err.error;
      }
    }
  }

  /** A request whose every unit was found by the caller's hashes. */
  private hitClaim(req: CacheableRequest, hits: CacheEntry[]): Claim {
    const all = req.mm_items.map((_, i) => i);
    const units = hits.map((hit, i) => ({
      key: hit.key,
      items: req.modality === 'image' ? [i] : all,
      hit,
      entry: hit,
      tokens: hit.tokens,
    }));
    return new Claim(units, req.modality, this.cache);
  }

  private async claim(
    req: CacheableRequest,
    items: Uint8Array[],
    deadline: number,
    modelPath: () => Promise<string>,
    hintKeys?: string[],
  ): Promise<Claim> {
    const all = { key: '', items: items.map((_, i) => i) };
    if (!this.cache.enabled) return new Claim([all], req.modality, this.cache);
    const units = await this.cache.units(
      req.modality,
      items,
      await modelPath(),
      tenantOf(req.req_id),
    );
    // The caller's hashes now name what their bytes really were (as far as it told the truth).
    if (hintKeys) units.forEach((u, i) => this.cache.alias(hintKeys[i]!, u.key));
    // All at once: each acquire takes its in-process claim before its first await.
    const claimed = await Promise.all(
      units.map(async (u): Promise<Unit> => {
        const got = await this.cache.acquire(u.key, deadline, req.req_id, this.tier);
        if ('hit' in got) return { ...u, hit: got.hit, entry: got.hit, tokens: got.hit.tokens };
        if ('join' in got) return { ...u, join: got.join, remote: got.remote };
        return { ...u, own: got.own };
      }),
    );
    const count = (f: (u: Unit) => unknown) => claimed.filter(f).length;
    const outcome = {
      req_id: req.req_id,
      hits: count((u) => u.hit),
      joins: count((u) => u.join && !u.remote),
      remote_joins: count((u) => u.remote),
      misses: count((u) => u.own),
    };
    // Every cache outcome at debug; one that crosses processes at info.
    if (outcome.remote_joins > 0) this.logger.log(outcome, 'joined an encode of another process');
    else this.logger.debug(outcome, 'embedding cache');
    return new Claim(claimed, req.modality, this.cache, this.tier);
  }
}
