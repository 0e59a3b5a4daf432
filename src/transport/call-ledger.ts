import type { Msg, MsgHdrs, Payload } from '@nats-io/transport-node';

interface Answer {
  data: Payload;
  headers?: MsgHdrs;
}

interface Entry {
  /** Set once the call was answered: what a later send of it gets again. */
  answer?: Answer;
  /** When the entry is dropped (Date.now ms). */
  until: number;
}

export type Arrival =
  | { kind: 'new' }
  /** Taken before and still running: the caller gets a receipt, nothing else. */
  | { kind: 'running' }
  /** Answered before: the same answer again (it was lost in transit, or is late). */
  | { kind: 'answered'; answer: Answer };

export interface LedgerStats {
  /** Calls known now, running or answered. */
  tracked: number;
  /** Sends of a call already running here (probes, or a resend whose receipt was lost). */
  joined: number;
  /** Answers sent again to a call already answered. */
  replayed: number;
  /** Calls not tracked because the ledger was full (a resend of one runs it again). */
  untracked: number;
  /** Answers recorded for a repeat. */
  answered: number;
  /** Probes of calls not known here (never run; the caller finds the callee unreachable). */
  unknown: number;
}

/**
 * The calls this process took under the receipt protocol (receipts.ts), by their call id:
 * a second send of a call joins the first instead of running it again, and a send after
 * the answer gets that answer again. Bounded: at most MAX_ENTRIES calls, each kept until
 * KEEP_MS past its deadline (the caller stops asking at its deadline), and a running call
 * whose handler never answered goes at the same time.
 */
export class CallLedger {
  static readonly MAX_ENTRIES = 10_000;
  static readonly KEEP_MS = 5_000;
  /** A deadline header further out than this is not believed. */
  static readonly MAX_DEADLINE_MS = 10 * 60_000;
  /** How long a call that came without a deadline is assumed to run, at most. */
  static readonly NO_DEADLINE_MS = 60_000;

  private readonly calls = new Map<string, Entry>();
  private sweeper?: NodeJS.Timeout;
  private readonly counts = { joined: 0, replayed: 0, untracked: 0, answered: 0, unknown: 0 };

  constructor(private readonly now: () => number = Date.now) {}

  get stats(): LedgerStats {
    return { tracked: this.calls.size, ...this.counts };
  }

  /** A send of call `id` with the caller's deadline (ms since the epoch, or undefined). */
  arrive(id: string, deadline: number | undefined): Arrival {
    const now = this.now();
    const entry = this.calls.get(id);
    if (entry && entry.until > now) {
      if (!entry.answer) {
        this.counts.joined++;
        return { kind: 'running' };
      }
      this.counts.replayed++;
      return { kind: 'answered', answer: entry.answer };
    }
    if (entry) this.calls.delete(id);
    if (this.calls.size >= CallLedger.MAX_ENTRIES) {
      this.sweep();
      if (this.calls.size >= CallLedger.MAX_ENTRIES) {
        this.counts.untracked++;
        return { kind: 'new' };
      }
    }
    this.calls.set(id, { until: this.keepUntil(deadline, now) });
    this.startSweeper();
    return { kind: 'new' };
  }

  /**
   * A probe of call `id` (receipts.ts): what a send would meet, but a call not known here
   * is `unknown`, never taken. Probe subjects run nothing: a caller may probe only the
   * calls it sent where its permissions let it send them.
   */
  peek(id: string): Arrival | { kind: 'unknown' } {
    const entry = this.calls.get(id);
    if (!entry || entry.until <= this.now()) {
      this.counts.unknown++;
      return { kind: 'unknown' };
    }
    return this.arrive(id, undefined);
  }

  /** Records the first answer `msg` gets, so a later send of the call is answered the same. */
  track(id: string, msg: Msg): Msg {
    const respond = msg.respond.bind(msg);
    msg.respond = (data?: Payload, opts?: { headers?: MsgHdrs }) => {
      const entry = this.calls.get(id);
      if (entry && !entry.answer && data !== undefined) {
        entry.answer = { data, headers: opts?.headers };
        this.counts.answered++;
      }
      return respond(data, opts);
    };
    return msg;
  }

  /** Drops what has expired; stops the sweeper once nothing is left. */
  sweep(): void {
    const now = this.now();
    for (const [id, entry] of this.calls) if (entry.until <= now) this.calls.delete(id);
    if (this.calls.size === 0) this.close();
  }

  close(): void {
    clearInterval(this.sweeper);
    this.sweeper = undefined;
  }

  private keepUntil(deadline: number | undefined, now: number): number {
    const end =
      deadline === undefined || !Number.isFinite(deadline)
        ? now + CallLedger.NO_DEADLINE_MS
        : Math.min(Math.max(deadline, now), now + CallLedger.MAX_DEADLINE_MS);
    return end + CallLedger.KEEP_MS;
  }

  private startSweeper(): void {
    if (this.sweeper) return;
    this.sweeper = setInterval(() => this.sweep(), 1_000);
    this.sweeper.unref();
  }
}
