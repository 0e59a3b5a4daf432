/** One cached embedding: a unit's rows in the staging dtype, and where they came from. */
export interface CacheEntry {
  key: string;
  data: Float32Array | Uint16Array;
  tokens: number;
  dim: number;
  /** Per item, as staged: `[t, h, w]` or `[feature_len]`. */
  grid: number[][];
  bytes: number;
  hits: number;
}

/** What a unit being encoded elsewhere in this process will be: its size early, its rows later. */
export interface Flight {
  /** Resolves once the owner knows the unit's tokens (after its plan). */
  planned: Promise<number>;
  /** Resolves with the entry once the owner's forward is done; rejects with its error. */
  done: Promise<CacheEntry>;
  plan(tokens: number): void;
  finish(entry: CacheEntry): void;
  fail(err: unknown): void;
}

function flight(): Flight {
  let plan!: (n: number) => void;
  let planFail!: (e: unknown) => void;
  let finish!: (e: CacheEntry) => void;
  let fail!: (e: unknown) => void;
  const planned = new Promise<number>((res, rej) => ((plan = res), (planFail = rej)));
  const done = new Promise<CacheEntry>((res, rej) => ((finish = res), (fail = rej)));
  // Nobody may be waiting: a failure with no joiner is not an unhandled rejection.
  planned.catch(() => undefined);
  done.catch(() => undefined);
  return {
    planned,
    done,
    plan,
    finish,
    fail: (e) => {
      planFail(e);
      fail(e);
    },
  };
}

export interface CacheStats {
  enabled: boolean;
  entries: number;
  bytes: number;
  max_bytes: number;
  hits: number;
  misses: number;
  joins: number;
  remote_joins: number;
  /** Misses here found in the object store tier (EPD_CACHE_STORE=jetstream). */
  store_hits: number;
  takeovers: number;
  evictions: number;
  hit_ratio: number;
  in_flight: number;
  top: { key: string; hits: number; bytes: number; tokens: number }[];
}

/**
 * Embeddings by content key, least recently used first out, within EPD_CACHE_MAX_BYTES;
 * and the keys being encoded right now in this process (single flight: a second request
 * for one joins the first instead of encoding it again).
 *
 * Eviction only drops the cache's reference: a staged request or a send still holding the
 * same rows keeps them alive (the garbage collector frees them after the last user), and
 * they stay counted in the staging budget, so an eviction or a purge never breaks one.
 */
export class EmbeddingCache {
  private readonly entries = new Map<string, CacheEntry>(); // insertion order = recency
  private readonly flights = new Map<string, Flight>();
  private usedBytes = 0;
  private readonly counters = {
    hits: 0,
    misses: 0,
    joins: 0,
    remoteJoins: 0,
    storeHits: 0,
    takeovers: 0,
    evictions: 0,
  };

  /**
   * @param onDrop called for each entry that leaves the cache (eviction, purge,
   *   replacement): whoever points other processes at it stops doing so.
   */
  constructor(
    readonly maxBytes: number,
    private readonly onDrop: (key: string) => void = () => undefined,
  ) {}

  get enabled(): boolean {
    return this.maxBytes > 0;
  }

  get bytes(): number {
    return this.usedBytes;
  }

  get count(): number {
    return this.entries.size;
  }

  get stats(): typeof this.counters {
    return { ...this.counters };
  }

  /** A hit (now the most recent), or undefined. */
  get(key: string): CacheEntry | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    this.entries.delete(key);
    this.entries.set(key, entry);
    entry.hits++;
    this.counters.hits++;
    return entry;
  }

  /** The entry of `key` for another process that joined our claim: recent, not counted as a hit. */
  peek(key: string): CacheEntry | undefined {
    const entry = this.entries.get(key);
    if (entry) {
      this.entries.delete(key);
      this.entries.set(key, entry);
    }
    return entry;
  }

  has(key: string): boolean {
    return this.entries.has(key);
  }

  /** The flight of `key` running in this process, if any. */
  flightOf(key: string): Flight | undefined {
    return this.flights.get(key);
  }

  /**
   * What became of a claim of ours (counted by the caller, once the cluster was asked):
   * encoded here (`miss`), another process owned it and we fetch its rows (`remote`), or
   * we took a dead owner's claim over (`takeover`, also a miss), or the object store tier
   * had it (`store`).
   */
  counted(outcome: 'miss' | 'remote' | 'takeover' | 'store'): void {
    if (outcome === 'remote') this.counters.remoteJoins++;
    else if (outcome === 'store') this.counters.storeHits++;
    else if (outcome === 'miss') this.counters.misses++;
    else this.counters.takeovers++;
  }

  /**
   * The flight of `key` if one runs (a join, counted), or a new one this caller owns (its
   * outcome counted by the caller with `counted`).
   */
  claim(key: string): { flight: Flight; mine: boolean } {
    const running = this.flights.get(key);
    if (running) {
      this.counters.joins++;
      return { flight: running, mine: false };
    }
    const own = flight();
    this.flights.set(key, own);
    return { flight: own, mine: true };
  }

  /**
   * Ends an owned flight: `entry` is cached (if it fits) and handed to its joiners, or
   * `err` is. True when the entry is now cached.
   */
  land(key: string, own: Flight, entry: CacheEntry | undefined, err?: unknown): boolean {
    if (this.flights.get(key) === own) this.flights.delete(key);
    if (!entry) {
      own.fail(err ?? new Error('encode did not finish'));
      return false;
    }
    const cached = this.put(entry);
    own.finish(entry);
    return cached;
  }

  /** Caches `entry` (evicting the least recently used); false when it is larger than the whole budget. */
  put(entry: CacheEntry): boolean {
    if (entry.bytes > this.maxBytes) return false;
    const old = this.entries.get(entry.key);
    if (old) {
      this.entries.delete(entry.key);
      this.usedBytes -= old.bytes;
    }
    for (const [key, e] of this.entries) {
      if (this.usedBytes + entry.bytes <= this.maxBytes) break;
      this.entries.delete(key);
      this.usedBytes -= e.bytes;
      this.counters.evictions++;
      this.onDrop(key);
    }
    this.entries.set(entry.key, entry);
    this.usedBytes += entry.bytes;
    return true;
  }

  /** Drops every entry (not the flights: their owners land them as usual). */
  purge(): number {
    const keys = [...this.entries.keys()];
    this.entries.clear();
    this.usedBytes = 0;
    for (const key of keys) this.onDrop(key);
    return keys.length;
  }

  view(top = 10): CacheStats {
    const { hits, misses, joins, remoteJoins, storeHits, takeovers, evictions } = this.counters;
    const lookups = hits + joins + remoteJoins + storeHits + misses;
    return {
      enabled: this.enabled,
      entries: this.entries.size,
      bytes: this.usedBytes,
      max_bytes: this.maxBytes,
      hits,
      misses,
      joins,
      remote_joins: remoteJoins,
      store_hits: storeHits,
      takeovers,
      evictions,
      hit_ratio:
        lookups === 0
          ? 0
          : Math.round(((hits + joins + remoteJoins + storeHits) / lookups) * 1000) / 1000,
      in_flight: this.flights.size,
      top: [...this.entries.values()]
        .sort((a, b) => b.hits - a.hits)
        .slice(0, top)
        .map((e) => ({ key: e.key, hits: e.hits, bytes: e.bytes, tokens: e.tokens })),
    };
  }
}
