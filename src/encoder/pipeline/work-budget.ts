import { Errors } from '../../common/errors/error-catalogue';
import type { MediaPlan } from '../preprocess/preprocess.types';

/** Bytes a decoded pixel costs: sharp's raw RGB. */
const DECODED_PIXEL_BYTES = 3;

/**
 * The working memory a planned part will take between its decode and the end of its
 * forward: the decoded pixels or samples, and the model input (float32) the forward reads.
 * Known from the headers, before anything is decoded.
 */
export function plannedWorkBytes(plan: MediaPlan): number {
  return plan.decodedPixels * DECODED_PIXEL_BYTES + plan.decodedAudioBytes + plan.inputBytes;
}

interface Waiter {
  lease: WorkLease;
  bytes: number;
  grant: () => void;
  timer?: NodeJS.Timeout;
}

export interface WorkBudgetStats {
  /** EPD_WORK_MAX_BYTES. */
  max_bytes: number;
  in_use_bytes: number;
  /** Parts waiting for room, oldest first. */
  waiting: number;
  waiting_bytes: number;
  /** Refused: `busy` (no room before the deadline) and `too_large` (more than the budget). */
  refused: { busy: number; too_large: number };
  /** Planned parts let in at once, and after a wait (with the waits' total ms). */
  immediate: number;
  waited: number;
  waited_ms: number;
  /**
   * Several models served: the most one model's requests may hold (EPD_MODEL_WORK_SHARE ×
   * the budget), and what each holds now. Absent with one model.
   */
  model_share_bytes?: number;
  per_model?: Record<string, number>;
}

/**
 * One process-wide budget for the memory encodes work in (EPD_WORK_MAX_BYTES): the media
 * bytes a request loaded, then what its plan says decoding and preprocessing will take.
 * Staged embeddings have their own budget (EPD_STAGING_MAX_BYTES).
 *
 * Loading charges as bytes arrive and never waits: a load that would overflow fails at
 * once (503 `memory_busy`), so the load's own bytes stay bounded. A planned part waits
 * for room, first come first served, until its deadline (then 503 `memory_busy`); a part
 * larger than the whole budget is refused at once (507 `work_too_large`). Waiters are
 * bounded by EPD_MAX_PENDING, since each is an admitted request.
 */
export class WorkBudget {
  private used = 0;
  /** Several models: each one's bytes held, and the most it may hold. */
  private readonly byModel = new Map<string, number>();
  private readonly modelShare: number;
  private readonly queue: Waiter[] = [];
  private readonly refused = { busy: 0, too_large: 0 };
  private immediate = 0;
  private waited = 0;
  private waitedMs = 0;

  /**
   * `models`: the served models' names; with more than one, each may hold at most `share`
   * of the budget, so a flood of one model's requests always leaves room for another's.
   */
  constructor(
    readonly maxBytes: number,
    private readonly now: () => number,
    models: readonly string[] = [],
    share = 1,
  ) {
    this.modelShare = models.length > 1 ? Math.floor(maxBytes * share) : Infinity;
    if (models.length > 1) for (const m of models) this.byModel.set(m, 0);
  }

  /**
   * A request's account: everything it holds goes back with release(). No req_id: a body.
   * `model`: the served model the request is for (its share is charged too).
   */
  lease(reqId?: string, model?: string): WorkLease {
    return new WorkLease(this, reqId, this.byModel.has(model ?? '') ? model : undefined);
  }

  get inUse(): number {
    return this.used;
  }

  stats(): WorkBudgetStats {
    return {
      max_bytes: this.maxBytes,
      in_use_bytes: this.used,
      waiting: this.queue.length,
      waiting_bytes: this.queue.reduce((n, w) => n + w.bytes, 0),
      refused: { ...this.refused },
      immediate: this.immediate,
      waited: this.waited,
      waited_ms: Math.round(this.waitedMs),
      ...(this.byModel.size > 0
        ? { model_share_bytes: this.modelShare, per_model: Object.fromEntries(this.byModel) }
        : {}),
    };
  }

  /** @internal WorkLease's: take `bytes` now, or refuse with 503 (loads never wait). */
  take(lease: WorkLease, bytes: number): void {
    if (!this.fits(bytes)) {
      this.refused.busy++;
      throw Errors.memoryBusy(bytes, this.maxBytes - this.used, this.maxBytes, lease.reqId);
    }
    if (!this.modelFits(lease, bytes)) {
      this.refused.busy++;
      throw this.shareBusy(lease, bytes);
    }
    this.credit(lease, bytes);
  }

  /** @internal WorkLease's: take `bytes` when there is room, in arrival order. */
  wait(lease: WorkLease, bytes: number, deadline: number): Promise<void> {
    // What the lease already holds is its own: the whole must fit the budget.
    if (lease.held + bytes > this.maxBytes) {
      this.refused.too_large++;
      return Promise.reject(Errors.workTooLarge(lease.held + bytes, this.maxBytes, lease.reqId));
    }
    if (lease.model !== undefined && lease.held + bytes > this.modelShare) {
      this.refused.too_large++;
      return Promise.reject(
        Errors.modelShareTooLarge(lease.model, lease.held + bytes, this.modelShare, lease.reqId),
      );
    }
    if (this.queue.length === 0 && this.fits(bytes) && this.modelFits(lease, bytes)) {
      this.immediate++;
      this.credit(lease, bytes);
      return Promise.resolve();
    }
    const since = this.now();
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        lease,
        bytes,
        grant: () => {
          clearTimeout(waiter.timer);
          this.waited++;
          this.waitedMs += this.now() - since;
          resolve();
        },
      };
      // No deadline (in-process callers may give none): the wait ends only with room.
      if (Number.isFinite(deadline))
        waiter.timer = setTimeout(
          () => {
            this.drop(waiter);
            this.refused.busy++;
            reject(
              this.fits(bytes) && !this.modelFits(lease, bytes)
                ? this.shareBusy(lease, bytes)
                : Errors.memoryBusy(bytes, this.maxBytes - this.used, this.maxBytes, lease.reqId),
            );
          },
          Math.min(2 ** 31 - 1, Math.max(0, deadline - this.now())),
        );
      this.queue.push(waiter);
      this.grantWaiting();
    });
  }

  /** @internal WorkLease's: gives `bytes` back and lets the waiters that now fit in. */
  give(lease: WorkLease, bytes: number): void {
    this.used -= bytes;
    if (lease.model !== undefined)
      this.byModel.set(lease.model, this.byModel.get(lease.model)! - bytes);
    this.grantWaiting();
  }

  private fits(bytes: number): boolean {
    return this.used + bytes <= this.maxBytes;
  }

  /** Within the lease's model's share (always, for a lease of no model or with one model). */
  private modelFits(lease: WorkLease, bytes: number): boolean {
    return lease.model === undefined || this.byModel.get(lease.model)! + bytes <= this.modelShare;
  }

  /**
   * Nothing of `model` is held outside the queue: its waiters' loaded bytes fill its share and
   * none can leave, so its first waiter goes in over the share (by at most one part).
   */
  private modelStuck(model: string): boolean {
    return (
      this.queue.reduce(
        (n, w) => (w.lease.model === model ? n - w.lease.held : n),
        this.byModel.get(model)!,
      ) <= 0
    );
  }

  private shareBusy(lease: WorkLease, bytes: number) {
    return Errors.modelShareBusy(
      lease.model!,
      bytes,
      this.byModel.get(lease.model!)!,
      this.modelShare,
      lease.reqId,
    );
  }

  private stuck(): boolean {
    return this.queue.reduce((n, w) => n - w.lease.held, this.used) <= 0;
  }

  private credit(lease: WorkLease, bytes: number): void {
    this.used += bytes;
    lease.held += bytes;
    if (lease.model !== undefined)
      this.byModel.set(lease.model, this.byModel.get(lease.model)! + bytes);
  }

  private drop(waiter: Waiter): void {
    clearTimeout(waiter.timer);
    const i = this.queue.indexOf(waiter);
    if (i >= 0) this.queue.splice(i, 1);
    this.grantWaiting(); // the head may have been what held the others back
  }

  /**
   * In arrival order, the first waiter goes in when it fits, or when nothing outside the
   * queue holds any bytes: then only waiters' loaded bytes fill the budget, and none of them
   * can ever leave it. That overcommits by at most one part, so the peak stays under twice
   * the budget. A waiter whose model's share is full (and not stuck the same way) is passed
   * over: another model's waiters behind it may go in; the budget as a whole keeps the order.
   */
  private grantWaiting(): void {
    for (let i = 0; i < this.queue.length;) {
      const w = this.queue[i]!;
      const model = w.lease.model;
      if (model !== undefined && !this.modelFits(w.lease, w.bytes) && !this.modelStuck(model)) {
        i++;
        continue;
      }
      if (!this.fits(w.bytes) && !this.stuck()) return;
      this.queue.splice(i, 1);
      this.credit(w.lease, w.bytes);
      w.grant();
    }
  }
}

/**
 * What one request holds of the work budget: its loaded bytes, then its planned part.
 * release() gives it all back; the lease may then be used again (a part encoded again).
 */
export class WorkLease {
  /** @internal Bytes taken; the budget credits them. */
  held = 0;

  constructor(
    private readonly budget: WorkBudget,
    readonly reqId?: string,
    /** The served model whose share it counts against (several models only). */
    readonly model?: string,
  ) {}

  /** Bytes being loaded: taken at once or refused (503 `memory_busy`). */
  charge(bytes: number): void {
    if (bytes > 0) this.budget.take(this, bytes);
  }

  /** Planned bytes: waits for room until `deadline`; 507 when the budget can never hold them. */
  async reserve(bytes: number, deadline: number): Promise<void> {
    if (bytes > 0) await this.budget.wait(this, bytes, deadline);
  }

  /** Gives back everything held. */
  release(): void {
    const held = this.held;
    this.held = 0;
    if (held > 0) this.budget.give(this, held);
  }
}
