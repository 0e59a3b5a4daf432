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
  private readonly queue: Waiter[] = [];
  private readonly refused = { busy: 0, too_large: 0 };
  private immediate = 0;
  private waited = 0;
  private waitedMs = 0;

  constructor(
    readonly maxBytes: number,
    private readonly now: () => number,
  ) {}

  /** A request's account: everything it holds goes back with release(). No req_id: a body. */
  lease(reqId?: string): WorkLease {
    return new WorkLease(this, reqId);
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
    };
  }

  /** @internal WorkLease's: take `bytes` now, or refuse with 503 (loads never wait). */
  take(lease: WorkLease, bytes: number): void {
    if (!this.fits(bytes)) {
      this.refused.busy++;
      throw Errors.memoryBusy(bytes, this.maxBytes - this.used, this.maxBytes, lease.reqId);
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
    if (this.queue.length === 0 && this.fits(bytes)) {
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
            reject(Errors.memoryBusy(bytes, this.maxBytes - this.used, this.maxBytes, lease.reqId));
          },
          Math.min(2 ** 31 - 1, Math.max(0, deadline - this.now())),
        );
      this.queue.push(waiter);
      this.grantWaiting();
    });
  }

  /** @internal WorkLease's: gives `bytes` back and lets the waiters that now fit in. */
  give(bytes: number): void {
    this.used -= bytes;
    this.grantWaiting();
  }

  private fits(bytes: number): boolean {
    return this.used + bytes <= this.maxBytes;
  }

  private stuck(): boolean {
    return this.queue.reduce((n, w) => n - w.lease.held, this.used) <= 0;
  }

  private credit(lease: WorkLease, bytes: number): void {
    this.used += bytes;
    lease.held += bytes;
  }

  private drop(waiter: Waiter): void {
    clearTimeout(waiter.timer);
    const i = this.queue.indexOf(waiter);
    if (i >= 0) this.queue.splice(i, 1);
    this.grantWaiting(); // the head may have been what held the others back
  }

  /**
   * The head goes in when it fits, or when nothing outside the queue holds any bytes:
   * then only waiters' loaded bytes fill the budget, and none of them can ever leave it.
   * That overcommits by at most one part, so the peak stays under twice the budget.
   */
  private grantWaiting(): void {
    while (this.queue.length > 0 && (this.fits(this.queue[0]!.bytes) || this.stuck())) {
      const w = this.queue.shift()!;
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
    if (held > 0) this.budget.give(held);
  }
}
