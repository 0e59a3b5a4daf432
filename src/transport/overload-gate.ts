import type { Msg } from '@nats-io/transport-node';
import { overloadedMessage } from '../common/errors/error-catalogue';
import { BARE_ID_PREFIX } from './json-interop.deserializer';
import type { StepOut } from './queue-group-membership';
import { utf8 } from './utf8';

type Handler = (err: Error | null, msg: Msg) => void;

interface Queued {
  msg: Msg;
  at: number;
  handler: Handler;
}

/**
 * How long the drain runs before it yields to I/O: short, so that arrivals are read (and
 * timed) early. (Longer slices while overloaded were measured: the backlog then grows
 * unseen in socket buffers, and calls are admitted that are already late.)
 */
const SLICE_MS = 2;

/**
 * dp_types never shed (nor withdrawn from the queue group): freeing a staged embedding is
 * what relieves a loaded encoder, and a publish is what wakes waiters, so shedding one
 * turns into 504s for every caller waiting on it (found by the burst test: 2,000 waits
 * and their publishes on one instance, every publish refused, every wait timed out).
 */
const NEVER_SHED = new Set(['release', 'publish_metadata']);

/** Whether calls of `dpType` may be shed (and its shared subscription withdrawn). */
export const sheddable = (dpType: string): boolean => !NEVER_SHED.has(dpType);

export interface GateStats {
  queued: number;
  /** How long the oldest queued call has waited, ms. */
  oldestMs: number;
  shed: Record<string, number>;
  handled: number;
  /** Whether the queue is kept short right now (EPD_OVERLOAD_SHEDDING_QUEUE_MS). */
  shedding: boolean;
  /** Spells of shedding in the group begun so far. */
  sheddingSpells: number;
}

/**
 * Load shedding for the NATS calls of one process. A call with nothing queued ahead of it
 * is handled at once; calls that arrive behind it wait in one FIFO queue, drained in
 * short slices between I/O, so the time a call spends waiting here is known. When the
 * calls ahead of a new one would take longer than EPD_OVERLOAD_QUEUE_MS to reach (or the
 * queue holds EPD_OVERLOAD_MAX_QUEUED), it is answered at once with 503 `overloaded`
 * ("encoder overloaded; retry after {ms} ms") instead of joining a backlog that would
 * outlive its caller's deadline: callers learn in milliseconds and may go elsewhere, and
 * the calls admitted are served at the rate the process sustains. A shed answer costs a
 * few regular expressions and a publish, yet still a share of a handled call (the message
 * is read and answered all the same; bench/results/overload.md measures both), hence the
 * second stage, `stepOut`. Without shedding (measured in bench/results/overload.md),
 * calls at twice the sustainable rate were mostly never answered: the backlog sat in
 * socket buffers, invisible, until each caller timed out.
 */
export class OverloadGate {
  private readonly queue: (Queued | undefined)[] = [];
  private head = 0;
  private draining = false;
  private handled = 0;
  private readonly shed = new Map<string, number>();
  /**
   * The second stage (EPD_OVERLOAD_STEP_OUT): when set, this process withdraws from the
   * queue group of the shared subjects once its queue holds half the bound (or a call is
   * shed), and rejoins once it is down to a quarter (see QueueGroupMembership).
   */
  stepOut?: StepOut;

  /**
   * When this process last shed a call while it stayed in the queue group (monotonic ms):
   * within EPD_OVERLOAD_QUEUE_MS of it, the load is past what it sustains, not a burst.
   */
  private shedInGroupAt = -Infinity;
  private sheddingSpells = 0;

  constructor(
    private readonly maxQueueMs: number,
    private readonly maxQueued: number,
    /** Monotonic ms (Clock.elapsed). */
    private readonly now: () => number,
    /** Wall-clock epoch ms (Clock.now), for the `Deadline` header. */
    private readonly epochNow: () => number,
    /**
     * EPD_OVERLOAD_SHEDDING_QUEUE_MS: the work a process keeps queued while it sheds and
     * stays in the group (0: the one bound, EPD_OVERLOAD_QUEUE_MS, throughout).
     */
    private readonly sheddingQueueMs = 0,
  ) {}

  get enabled(): boolean {
    return this.maxQueueMs > 0;
  }

  get stats(): GateStats {
    const oldest = this.queue[this.head];
    return {
      queued: this.queue.length - this.head,
      oldestMs: oldest ? Math.round(this.now() - oldest.at) : 0,
      shed: Object.fromEntries(this.shed),
      handled: this.handled,
      shedding: this.shedding(this.now()),
      sheddingSpells: this.sheddingSpells,
    };
  }

  /** `handler` for `dpType`'s subscription, behind the gate (as it is when shedding is off). */
  wrap(dpType: string, handler: Handler): Handler {
    if (!this.enabled) return handler;
    const mayShed = sheddable(dpType);
    return (err, msg) => {
      if (err) return handler(err, msg);
      const now = this.now();
      if (mayShed && msg.reply && this.overloaded(now, msg)) return this.reject(dpType, msg, now);
      if (!this.draining) {
        // Nothing queued or being drained: the first call of this turn runs at once (no
        // hop: +0.03 ms at p50 measured when every call went through the queue), and the
        // calls that arrive behind it in the same turn queue, timed, for the drain.
        this.draining = true;
        setImmediate(this.drain);
        this.handled++;
        return handler(null, msg);
      }
      this.queue.push({ msg, at: now, handler });
      // Out of the group at half the bound: the calls already on their way here (the
      // UNSUB takes a round trip, and the socket holds a backlog) then fill the other
      // half instead of being shed.
      if (this.stepOut && !this.stepOut.out && this.aheadMs(now) > this.maxQueueMs / 2)
        this.stepOut.leave();
    };
  }

  /**
   * How long the queued calls take to drain: their count at the measured rate (before
   * the first measurement, the oldest's wait). Not the oldest's wait once measured: after
   * a stretch out of the group, the calls at the head are old while few are behind them,
   * and rejoining would be undone by the next arrival.
   */
  private aheadMs(now: number): number {
    if (this.perMs > 0) return this.depth / this.perMs;
    const oldest = this.queue[this.head];
    return oldest ? now - oldest.at : 0;
  }

  private get depth(): number {
    return this.queue.length - this.head;
  }

  /**
   * Whether `msg`, arriving now, would wait longer than it may: the oldest queued call
   * already has, or the queue is deeper than the drain empties in that time (calls per ms,
   * measured; this catches a burst before anyone has waited). The wait a call may take is
   * EPD_OVERLOAD_QUEUE_MS, or half of the time budget the call itself declares when that
   * is longer (`timeout_ms`, or the `Deadline` header), up to MAX_BOUND_FACTOR times
   * EPD_OVERLOAD_QUEUE_MS: a burst of 10,000 waits that declare 15 s drains in well under
   * a second and is served, not refused, while callers that must know within 1 s still
   * learn in time. The budget is read only when the queue is past EPD_OVERLOAD_QUEUE_MS.
   */
  private overloaded(now: number, msg: Msg): boolean {
    const depth = this.depth;
    if (depth === 0) return false;
    if (depth >= this.maxQueued) return true;
    if (this.shedding(now) && this.aheadMs(now) > this.sheddingQueueMs) return true;
    const waited = now - this.queue[this.head]!.at;
    const ahead = this.perMs > 0 ? depth / this.perMs : 0;
    const late = Math.max(waited, ahead);
    if (late <= this.maxQueueMs) return false;
    return late > this.boundFor(msg);
  }

  /**
   * Whether this process is shedding while it stays in the queue group: it shed a call
   * within the last EPD_OVERLOAD_QUEUE_MS and could not step out (a lone instance, the
   * anchor, a DP worker, or EPD_OVERLOAD_STEP_OUT off). Its load is then past what it
   * sustains, not a burst, and it keeps only EPD_OVERLOAD_SHEDDING_QUEUE_MS of work queued
   * (measured by the drain rate) instead of up to the callers' budgets: the calls it
   * serves are those that just arrived, still in the CPU's caches, and answered in a few
   * ms. With the long queue, a lone instance at twice its sustainable rate served calls
   * that had waited hundreds of ms, each at a cost well over a closed loop's, and served
   * fewer of them (bench/results/overload.md has a row with this off). A burst of calls
   * that declare long budgets is not shed, so this never starts on one alone.
   */
  private shedding(now: number): boolean {
    return this.sheddingQueueMs > 0 && now - this.shedInGroupAt < this.maxQueueMs;
  }

  /** How long `msg` may wait in the queue (see overloaded). */
  private boundFor(msg: Msg): number {
    let budget = 0;
    const header = msg.headers?.get('Deadline');
    if (header) budget = Number(header) - this.epochNow();
    if (!(budget > 0)) {
      const m = TIMEOUT_MS.exec(msg.string());
      budget = m ? Number(m[1]) : 0;
    }
    const cap = this.maxQueueMs * MAX_BOUND_FACTOR;
    return Math.max(this.maxQueueMs, Math.min(budget / 2, cap));
  }

  /** Calls handled per ms of wall time while the queue was busy, smoothed. */
  private perMs = 0;
  private windowStart = 0;
  private windowHandled = 0;

  private measure(now: number, handled: number): void {
    if (this.windowStart === 0) this.windowStart = now;
    this.windowHandled += handled;
    const elapsed = now - this.windowStart;
    if (elapsed < 50) return;
    const rate = this.windowHandled / elapsed;
    this.perMs = this.perMs === 0 ? rate : 0.7 * this.perMs + 0.3 * rate;
    this.windowStart = now;
    this.windowHandled = 0;
  }

  private readonly drain = (): void => {
    if (this.head >= this.queue.length) {
      this.draining = false; // only the inline call of the last turn: nothing queued
      return;
    }
    const until = this.now() + SLICE_MS;
    let n = 0;
    while (this.head < this.queue.length) {
      const item = this.queue[this.head]!;
      this.queue[this.head++] = undefined;
      n++;
      item.handler(null, item.msg);
      if (this.now() >= until) break;
    }
    this.handled += n;
    if (this.head >= this.queue.length) {
      this.queue.length = 0;
      this.head = 0;
      this.draining = false;
      this.stepOut?.rejoin();
      // An idle gap is not a slow drain: the next busy period measures afresh.
      this.windowStart = 0;
      this.windowHandled = 0;
      return;
    }
    const now = this.now();
    this.measure(now, n);
    // Back in the group once what is queued takes under a quarter of the bound to drain:
    // the calls that then arrive refill it before it runs dry.
    if (this.stepOut?.out && this.aheadMs(now) < this.maxQueueMs / 4) this.stepOut.rejoin();
    // Compact now and then, so that the array does not grow with every call ever queued.
    if (this.head > 4096 && this.head * 2 > this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
    setImmediate(this.drain);
  };

  /**
   * 503 `overloaded` to the caller now, in the reply shape of a handled call, as cheaply
   * as that can be done (no MMError, no parse, no object built and stringified): this runs
   * for every call shed, and at twice the sustainable rate that is most calls. The id and
   * req_id are echoed as the caller wrote them when that is plainly valid JSON.
   */
  private reject(dpType: string, msg: Msg, now: number): void {
    this.shed.set(dpType, (this.shed.get(dpType) ?? 0) + 1);
    this.stepOut?.leave();
    if (!this.stepOut?.out) {
      if (this.sheddingQueueMs > 0 && !this.shedding(now)) this.sheddingSpells++;
      this.shedInGroupAt = now;
    }
    const text = msg.string();
    const envelope = ENVELOPE.test(text);
    const id = envelope ? jsonString(ID.exec(text)?.[1] ?? '', '""') : SHED_ID;
    const reqId = REQ_ID.exec(text)?.[1];
    const oldest = this.queue[this.head];
    const retryAfter = Math.max(this.maxQueueMs, Math.round(oldest ? now - oldest.at : 0));
    msg.respond(
      utf8(
        `{"id":${id},"err":{"status":"error","code":503,"type":"overloaded","message":"${overloadedMessage(retryAfter)}","req_id":${reqId === undefined ? 'null' : jsonString(reqId, 'null')}}${envelope ? ',"isDisposed":true}' : '}'}`,
      ),
    );
  }
}

const SHED_ID = JSON.stringify(`${BARE_ID_PREFIX}shed`);

/** The longest a call may queue, in units of EPD_OVERLOAD_QUEUE_MS, whatever it declares. */
const MAX_BOUND_FACTOR = 8;
/** A call's declared `timeout_ms`, read without a parse. */
const TIMEOUT_MS = /"timeout_ms"\s*:\s*(\d{1,9})\b/;

/**
 * A JSON string literal of a JSON string's contents as captured: verbatim when they hold
 * no escape and no control character (then they are valid as they are), else decoded and
 * encoded again; `invalid` when they are not valid JSON.
 */
function jsonString(contents: string, invalid: string): string {
  if (!NEEDS_CHECK.test(contents)) return `"${contents}"`;
  try {
    return JSON.stringify(JSON.parse(`"${contents}"`) as string);
  } catch {
    return invalid;
  }
}

/** Nest's envelope `{"pattern": …}`, and the two fields a shed answer echoes, read without a parse. */
const ENVELOPE = /^\s*\{\s*"pattern"\s*:/;
const ID = /"id"\s*:\s*"((?:[^"\\]|\\.)*)"/;
const REQ_ID = /"req_id"\s*:\s*"((?:[^"\\]|\\.)*)"/;
// eslint-disable-next-line no-control-regex
const NEEDS_CHECK = /[\\\u0000-\u001f]/;
