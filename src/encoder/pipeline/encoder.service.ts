import { Injectable, Logger } from '@nestjs/common';
import { Clock } from '../../common/clock';
import { Errors } from '../../common/errors/error-catalogue';
import { MMError } from '../../common/errors/mm-error';
import { DeliveryService } from '../../delivery/delivery.service';
import { MetaRegistry } from '../../meta-registry/meta-registry.service';
import { ReqStateStore, type ReqState } from '../../requests/req-state.store';
import { EncodeAdmission, type EncodeOutcome } from './encode-admission.service';
import type { EncodeReport } from './encoder.metrics';
import type { Endpoint } from '../../transfer/embedding-transport';
import type { EncodeRequest } from './encode-request.schema';
import type { EncodeResponse, StageTimings } from './encode-response';
import { EncodeStages, type EncodeSize } from './encode-stages.service';
import { itemGrids, type PreprocessOk } from '../preprocess/preprocess.types';
import type { ScheduledResult } from '../scheduler/encode-scheduler.service';
import { EncodeCache } from '../../cache/encode-cache.service';
import type { CacheEntry, Flight } from '../../cache/embedding-cache';
import { inSpan, SpanKind } from '../../tracing/tracing';
import { discard } from '../workers/parcel';
import type { SlabSlot } from '../backend/staging-slab';

const round = (ms: number) => Math.round(ms * 1000) / 1000;

/** Error frames to receivers are best effort and must not hold the failed encode's reply long. */
const ERROR_FRAME_MS = 2000;

/**
 * The receivers named in the encode request itself: `prefill_host` with one
 * `embedding_port` (SGLang's zmq_to_tokenizer) or a list of them (its legacy
 * zmq_to_scheduler form).
 */
function targetsOf(req: EncodeRequest): Endpoint[] {
  if (!req.prefill_host || req.embedding_port == null) return [];
  const ports = Array.isArray(req.embedding_port) ? req.embedding_port : [req.embedding_port];
  return ports.map((port) => ({ host: req.prefill_host!, port }));
}

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

/** Every unit's rows, in item order, and what producing them cost. */
interface Encoded {
  data: Float32Array | Uint16Array;
  /** The slab slot `data` views, if it is one; held for the request until it is staged. */
  slot?: SlabSlot;
  tokens: number;
  dim: number;
  grid: number[][];
  timings: Omit<StageTimings, 'load_ms' | 'stage_ms' | 'total_ms'>;
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

async function joined<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (err) {
    if (err instanceof MMError && MEDIA_FAILURES.has(err.type)) throw err;
    throw new JoinedFailed(err);
  }
}

const unwrapJoined = (err: unknown) => (err instanceof JoinedFailed ? err.error : err);

function concat(parts: (Float32Array | Uint16Array)[]): Float32Array | Uint16Array {
  const total = parts.reduce((n, p) => n + p.length, 0);
  // The parts' own constructor: rows that came from a worker thread may belong to another
  // realm (a test runner's), where `instanceof Float32Array` is false.
  const Ctor = parts[0]!.constructor as new (n: number) => Float32Array | Uint16Array;
  const out = new Ctor(total);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/**
 * A delivery failure after staging: the embedding is good and stays staged (receivers may
 * retry with `send`), so the encode fails without publishing {error} or freeing it.
 */
class DeliveryFailedAfterStage extends Error {
  constructor(readonly error: unknown) {
    super('delivery failed after staging');
  }
}

/**
 * The encode pipeline: admit → load → plan → preprocess (worker threads) → publish
 * metadata → batched forward (inference worker) → stage → publish again → deliver →
 * reply. Every failure after admission publishes `{error}` so waiters fail fast with the
 * real reason, and frees the request's state and staging bytes.
 */
@Injectable()
export class EncoderService {
  private readonly logger = new Logger(EncoderService.name);

  constructor(
    private readonly clock: Clock,
    private readonly admission: EncodeAdmission,
    private readonly stages: EncodeStages,
    private readonly states: ReqStateStore,
    private readonly registry: MetaRegistry,
    private readonly delivery: DeliveryService,
    private readonly cache: EncodeCache,
  ) {}

  /** One `encode` span (tracing on), with a child per stage. */
  encode(req: EncodeRequest, deadline: number): Promise<EncodeResponse> {
    return inSpan(
      'encode',
      {
        'epd.req_id': req.req_id,
        'epd.modality': req.modality,
        'epd.items': req.mm_items.length,
        'epd.part_idx': req.part_idx,
      },
      async (span) => {
        const res = await this.encodeRequest(req, deadline);
        span?.setAttributes({
          'epd.embedding_len': res.embedding_len,
          'epd.embedding_dim': res.embedding_dim,
          'epd.embedding_size': res.embedding_size,
          'epd.batch_size': res.timings.batch_size,
        });
        return res;
      },
      SpanKind.SERVER,
    );
  }

  private async encodeRequest(req: EncodeRequest, deadline: number): Promise<EncodeResponse> {
    const started = this.clock.elapsed();
    // A push this encoder may not make (EPD_ALLOWED_DESTINATIONS) is refused before any work.
    await this.delivery.checkTargets(targetsOf(req), req.req_id);
    this.admission.admit(req.modality, req.req_id);
    // Released before it began: waiters learn it at once instead of at their deadline.
    const tombstoned = this.states.isTombstoned(req.req_id);
    let state: ReqState;
    try {
      state = this.states.begin(req.req_id, req.modality, req.part_idx, req.num_parts);
    } catch (err) {
      this.admission.settle(req.modality, 'rejected', { error: err });
      if (tombstoned && err instanceof MMError) await this.publishError(req, err.message);
      throw err;
    }
    let outcome: EncodeOutcome = 'error';
    let report: EncodeReport = {};
    try {
      const response = await this.pipeline(req, state, deadline, started);
      outcome = 'success';
      report = {
        timings: response.timings,
        items: req.mm_items.length,
        tokens: response.embedding_len,
      };
      return response;
    } catch (caught) {
      if (caught instanceof DeliveryFailedAfterStage) {
        report = { error: caught.error };
        throw caught.error;
      }
      const err = caught;
      report = { error: err };
      const message = err instanceof MMError ? err.message : 'internal error';
      const code = err instanceof MMError ? err.code : 500;
      await Promise.all([
        this.publishError(req, message),
        this.delivery.failed(state, targetsOf(req), { message, code }, this.errorDeadline()),
      ]);
      this.states.discard(state);
      if (!(err instanceof MMError))
        this.logger.error({ req_id: req.req_id, err }, 'encode failed');
      throw err;
    } finally {
      this.states.finishEncode(state);
      this.admission.settle(req.modality, outcome, report);
    }
  }

  private async pipeline(
    req: EncodeRequest,
    state: ReqState,
    deadline: number,
    started: number,
  ): Promise<EncodeResponse> {
    const { req_id: reqId } = req;
    // Trusting the caller's hashes, every item may be cached already: nothing to load.
    const hinted = await this.hinted(req);
    const loadStart = this.clock.elapsed();
    const items = hinted?.hits ? [] : await this.stages.load(req, deadline);
    const loadMs = this.clock.elapsed() - loadStart;
    this.checkReleased(state);

    // A unit another request was encoding failed for its own reasons (released, out of
    // budget): encode it here instead, at most twice.
    let reserved = 0;
    const reserve = (bytes: number) => {
      if (bytes > reserved) this.states.reserve(state, bytes - reserved);
      reserved = Math.max(reserved, bytes);
    };
    let encoded: Encoded;
    for (let attempt = 1; ; attempt++) {
      try {
        encoded = hinted?.hits
          ? await this.encodeClaimed(
              req,
              state,
              [],
              this.hitUnits(req, hinted.hits),
              [],
              deadline,
              reserve,
            )
          : await this.encodeUnits(req, state, items, deadline, reserve, hinted?.keys);
        break;
      } catch (err) {
        if (!(err instanceof JoinedFailed) || attempt >= 3) throw unwrapJoined(err);
      }
    }

    const stageStart = this.clock.elapsed();
    const { data, slot, tokens, dim, grid } = encoded;
    const bytes = data.byteLength;
    await inSpan('stage', { 'epd.bytes': bytes }, async () => {
      const embedding = { data, slot, tokens, dim, dtype: this.stages.stagingDtype, bytes, grid };
      try {
        this.states.stage(state, embedding);
      } catch (err) {
        slot?.drop(); // not the state's to free
        throw err;
      }
      await this.registry.publish(
        reqId,
        { embedding_size: bytes, embedding_len: tokens, embedding_dim: dim },
        req.part_idx,
        this.registry.self,
      );
    });
    const stageMs = this.clock.elapsed() - stageStart;

    const targets = targetsOf(req);
    const deliver = () => this.delivery.afterStage(state, targets, deadline);
    // A span only when there is a delivery to wait for (pushes, or registered receivers).
    const delivering =
      targets.length > 0 || state.receiveCount !== undefined
        ? inSpan('deliver', { 'epd.targets': targets.length }, deliver)
        : deliver();
    const destinations = await delivering.catch((err: unknown) => {
      throw new DeliveryFailedAfterStage(err);
    });

    const timings: StageTimings = {
      ...encoded.timings,
      load_ms: round(loadMs),
      stage_ms: round(stageMs),
      total_ms: round(this.clock.elapsed() - started),
    };
    return {
      req_id: reqId,
      part_idx: req.part_idx,
      embedding_size: bytes,
      embedding_len: tokens,
      embedding_dim: dim,
      timings,
      ...(destinations ? { destinations } : {}),
    };
  }

  /**
   * Plan → reserve → preprocess → publish metadata → forward, for the units of `items`
   * that neither the cache has (a hit) nor another request is encoding (a join); the
   * output is every unit's rows in item order. Without the cache the request is one unit.
   * Every flight this call owns is landed, with its entry or its failure, before it
   * returns: a joiner never waits for an owner that has stopped.
   */
  private async encodeUnits(
    req: EncodeRequest,
    state: ReqState,
    items: Buffer[],
    deadline: number,
    reserve: (bytes: number) => void,
    hintKeys?: string[],
  ): Promise<Encoded> {
    const units = await this.claimUnits(req, items, deadline, hintKeys);
    const mine = units.filter((u) => !u.hit && !u.join);
    try {
      return await this.encodeClaimed(req, state, items, units, mine, deadline, reserve);
    } catch (err) {
      for (const u of mine) if (u.own && !u.entry) this.cache.land(u.key, u.own, undefined, err);
      throw err;
    }
  }

  /**
   * With EPD_CACHE_TRUST_CLIENT_HASH: the caller's hash of each item (its `content_hash`,
   * else SGLang's `hashes`: a list with one per item, or a scalar for a single item) as
   * lookup keys in its `cache_namespace`.
   */
  private async hinted(
    req: EncodeRequest,
  ): Promise<{ keys: string[]; hits?: CacheEntry[] } | undefined> {
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
    return this.cache.hinted(
      req.modality,
      hints,
      req.cache_namespace ?? '',
      await this.modelPath(req),
    );
  }

  /** Units of a request whose every unit was found by the caller's hashes. */
  private hitUnits(req: EncodeRequest, hits: CacheEntry[]): Unit[] {
    const all = req.mm_items.map((_, i) => i);
    return hits.map((hit, i) => ({
      key: hit.key,
      items: req.modality === 'image' ? [i] : all,
      hit,
      entry: hit,
      tokens: hit.tokens,
    }));
  }

  private async modelPath(req: EncodeRequest): Promise<string> {
    const info = await this.stages.models();
    return req.modality === 'audio' ? info.audioPath : info.visionPath;
  }

  private async claimUnits(
    req: EncodeRequest,
    items: Buffer[],
    deadline: number,
    hintKeys?: string[],
  ): Promise<Unit[]> {
    const all = { key: '', items: items.map((_, i) => i) };
    if (!this.cache.enabled) return [all];
    const units = await this.cache.units(req.modality, items, await this.modelPath(req));
    // The caller's hashes now name what their bytes really were (as far as it told the truth).
    if (hintKeys) units.forEach((u, i) => this.cache.alias(hintKeys[i]!, u.key));
    // All at once: each acquire takes its in-process claim before its first await.
    const claimed = await Promise.all(
      units.map(async (u): Promise<Unit> => {
        const got = await this.cache.acquire(u.key, deadline, req.req_id);
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
    return claimed;
  }

  private async encodeClaimed(
    req: EncodeRequest,
    state: ReqState,
    items: Buffer[],
    units: Unit[],
    mine: Unit[],
    deadline: number,
    reserve: (bytes: number) => void,
  ): Promise<Encoded> {
    const mineIdx = mine.flatMap((u) => u.items);
    const part =
      mineIdx.length === items.length
        ? req
        : { ...req, mm_items: mineIdx.map((i) => req.mm_items[i]!) };
    const partItems = mineIdx.map((i) => items[i]!);
    const t = { plan: 0, preWall: 0 };
    let size: EncodeSize | undefined;
    if (mineIdx.length > 0) {
      // Headers first: the caps and the staging reservation come before any decoding.
      const planStart = this.clock.elapsed();
      size = await this.stages.plan(part, partItems);
      t.plan = this.clock.elapsed() - planStart;
      // Several units are images, one item each; one unit may be a whole video (whose
      // plan has one entry for all its frames) or every item of an uncached request.
      let k = 0;
      for (const u of mine) {
        u.tokens = mine.length === 1 ? size.tokens : size.itemTokens[k++]!;
        u.own?.plan(u.tokens); // before any wait of ours: two requests joining each other proceed
      }
    }
    for (const u of units) if (u.join) u.tokens = await joined(u.join.planned);
    const dim = size?.dim ?? (await this.stages.dimOf(req.modality));
    const tokens = units.reduce((n, u) => n + u.tokens!, 0);
    reserve(tokens * dim * this.stages.bytesPerValue);
    this.checkReleased(state);

    let pre: PreprocessOk | undefined;
    let result: ScheduledResult | undefined;
    try {
      if (size) {
        const preStart = this.clock.elapsed();
        pre = await this.stages.preprocess(part, partItems, size);
        t.preWall = this.clock.elapsed() - preStart;
        this.checkReleased(state);
      }
      const meta = {
        embedding_size: tokens * dim * this.stages.bytesPerValue,
        embedding_len: tokens,
        embedding_dim: dim,
      };
      await this.registry.publish(req.req_id, meta, req.part_idx, this.registry.self);
      if (size && pre) {
        result = await this.stages.forward(part, pre, size, deadline, () => state.releaseRequested);
      }
    } finally {
      // The inference thread has the model input by now, unless the request ended first:
      // then its buffer is freed here, not whenever a collection finds the port.
      discard(pre?.data);
    }
    // The forward's slab slot (if any) is this request's until staged: freed on any way out.
    let slot = result?.output.slot;
    let data: Float32Array | Uint16Array;
    let entries: CacheEntry[];
    try {
      if (pre && result) {
        // Landed before the release check: requests that joined this one get its rows even
        // when this one was released meanwhile.
        this.landMine(req, mine, result.output.data, dim, itemGrids(pre));
        this.checkReleased(state);
      }
      for (const u of units) if (u.join) u.entry = await joined(u.join.done);
      entries = units.map((u) => u.entry!);
      data = entries.length === 1 ? entries[0]!.data : concat(entries.map((e) => e.data));
    } catch (err) {
      slot?.drop();
      throw err;
    }
    if (slot && data !== result?.output.data) {
      slot.drop(); // staged from a copy
      slot = undefined;
    }
    return {
      data,
      slot,
      tokens,
      dim,
      grid: entries.flatMap((e) => e.grid),
      timings: {
        queue_ms: round(result?.queueMs ?? 0),
        plan_ms: round(t.plan),
        preprocess_wait_ms: round(Math.max(0, t.preWall - (pre?.ms ?? 0))),
        preprocess_ms: round(pre?.ms ?? 0),
        forward_ms: round(result?.forwardMs ?? 0),
        batch_size: result?.batchSize ?? 0,
        ...(this.cache.enabled
          ? {
              cache_hits: units.filter((u) => u.hit).length,
              cache_joins: units.filter((u) => u.join).length,
              cache_remote_joins: units.filter((u) => u.remote).length,
            }
          : {}),
      },
    };
  }

  /** The forward's rows, cut into this call's units (cached, and handed to their joiners). */
  private landMine(
    req: EncodeRequest,
    mine: Unit[],
    out: Float32Array | Uint16Array,
    dim: number,
    grids: number[][],
  ): void {
    let row = 0;
    let item = 0;
    for (const u of mine) {
      const rows = u.tokens! * dim;
      // One unit owns the whole output; several get their own copies, so that a cached
      // entry never keeps a larger buffer alive than it accounts for.
      const data = mine.length === 1 ? out : out.slice(row, row + rows);
      const grid = req.modality === 'image' ? grids.slice(item, item + u.items.length) : grids;
      u.entry = { key: u.key, data, tokens: u.tokens!, dim, grid, bytes: data.byteLength, hits: 0 };
      if (u.own) this.cache.land(u.key, u.own, u.entry);
      row += rows;
      item += u.items.length;
    }
  }

  private errorDeadline(): number {
    return this.clock.now() + ERROR_FRAME_MS;
  }

  private checkReleased(state: ReqState): void {
    if (state.releaseRequested) throw Errors.releasedDuringEncode(state.reqId);
  }

  private async publishError(req: EncodeRequest, message: string): Promise<void> {
    try {
      await this.registry.publish(req.req_id, { error: message }, req.part_idx, this.registry.self);
    } catch (err) {
      this.logger.warn(
        { req_id: req.req_id, err: (err as Error).message },
        'could not publish error metadata',
      );
    }
  }
}
