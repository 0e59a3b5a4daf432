import type { Msg, MsgHdrs, Payload } from '@nats-io/transport-node';

interface Answer {
  data: Payload;
  headers?: MsgHdrs;
}

interface Entry {
  /** Set once the call was answered: what a later send of it gets again. */
  answer?: Answer;
  /** When the entry is dropped (epoch ms). */
  until: number;
  /** What it costs: its key, and its answer once recorded. */
  bytes: number;
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
  /** Calls not tracked because the ledger was full, or their id too long (a resend of one runs it again). */
  untracked: number;
  /** Bytes the entries hold (keys and recorded answers). */
  bytes: number;
  /** Answers recorded for a repeat. */
  answered: number;
  /** Probes of calls not known here (never run; the caller finds the callee unreachable). */
  unknown: number;
}

/**
 * The calls this process took under the receipt protocol (receipts.ts), by their call id:
 * a second send of a call joins the first instead of running it again, and a send after
 * the answer gets that answer again. Bounded three ways:
 * - a call id longer than MAX_ID_CHARS is not tracked (300 calls with 900 KiB ids once kept
 *   299 MB); keys and recorded answers together stay under MAX_BYTES;
 * - at most MAX_ENTRIES calls; a running call is kept KEEP_MS past its deadline (the
 *   caller stops asking at its deadline), and the deadline believed is at most the
 *   service's own cap (EPD_REQ_TIMEOUT_MS);
 * - an answered call is kept ANSWERED_KEEP_MS after its answer (the caller probes every
 *   PROBE_MS, so an answer lost in transit is asked for again long before), not until its
 *   deadline: at 1,000 calls/s with 15 s deadlines the ledger used to fill, and a call then
 *   went untracked and its caller was told "stopped answering" while it ran.
 * A full ledger is swept at most once per FULL_SWEEP_MS, not on every arrival.
 */
export class CallLedger {
  static readonly MAX_ENTRIES = 50_000;
  static readonly MAX_BYTES = 32 * 2 ** 20;
  static readonly MAX_ID_CHARS = 128;
  static readonly KEEP_MS = 5_000;
  static readonly ANSWERED_KEEP_MS = 5_000;
  static readonly FULL_SWEEP_MS = 100;
  /** How long a call that came without a deadline is assumed to run, at most. */
  static readonly NO_DEADLINE_MS = 60_000;

  private readonly calls = new Map<string, Entry>();
  private sweeper?: NodeJS.Timeout;
  private readonly counts = { joined: 0, replayed: 0, untracked: 0, answered: 0, unknown: 0 };
  private bytes = 0;
  private lastFullSweep = -Infinity;

  /**
   * @param now epoch ms
   * @param maxDeadlineMs the furthest deadline believed, from now (EPD_REQ_TIMEOUT_MS)
   */
  constructor(
    private readonly now: () => number,
    private readonly maxDeadlineMs: number = 10 * 60_000,
  ) {}

  get stats(): LedgerStats {
    return { tracked: this.calls.size, ...this.counts, bytes: this.bytes };
  }

  /** Whether `id` may be tracked at all (see MAX_ID_CHARS). */
  static acceptsId(id: string): boolean {
    return id.length > 0 && id.length <= CallLedger.MAX_ID_CHARS;
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
    if (entry) this.remove(id, entry);
    if (!CallLedger.acceptsId(id)) {
      this.counts.untracked++;
      return { kind: 'new' };
    }
    if (this.full()) {
      if (now - this.lastFullSweep >= CallLedger.FULL_SWEEP_MS) {
        this.lastFullSweep = now;
        this.sweep();
      }
      if (this.full()) {
        this.counts.untracked++;
        return { kind: 'new' };
      }
    }
    const bytes = 2 * id.length + ENTRY_OVERHEAD;
    this.calls.set(id, { until: this.keepUntil(deadline, now), bytes });
    this.bytes += bytes;
    this.startSweeper();
    return { kind: 'new' };
  }

  private full(): boolean {
    return this.calls.size >= CallLedger.MAX_ENTRIES || this.bytes >= CallLedger.MAX_BYTES;
  }

  private remove(id: string, entry: Entry): void {
    this.calls.delete(id);
    this.bytes -= entry.bytes;
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
        const size = typeof data === 'string' ? 2 * data.length : data.byteLength;
        if (this.bytes + size <= CallLedger.MAX_BYTES) {
          entry.answer = { data: ownBytes(data), headers: opts?.headers };
          entry.bytes += size;
          this.bytes += size;
          entry.until = Math.min(entry.until, this.now() + CallLedger.ANSWERED_KEEP_MS);
          this.counts.answered++;
        } else {
          // No room to keep it: the call is forgotten, and a resend would run it again.
          this.remove(id, entry);
          this.counts.untracked++;
        }
      }
      return respond(data, opts);
    };
    return msg;
  }

  /** Drops what has expired; stops the sweeper once nothing is left. */
  sweep(): void {
    const now = this.now();
    for (const [id, entry] of this.calls) if (entry.until <= now) this.remove(id, entry);
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
        : Math.min(Math.max(deadline, now), now + this.maxDeadlineMs);
    return end + CallLedger.KEEP_MS;
  }

  private startSweeper(): void {
    if (this.sweeper) return;
    this.sweeper = setInterval(() => this.sweep(), 1_000);
    this.sweeper.unref();
  }
}

/** What an entry costs beyond its key and answer (the Map slot and the object), roughly. */
const ENTRY_OVERHEAD = 96;

/**
 * An answer kept as its own bytes: a reply encoded with `Buffer.from` (utf8.ts) is a slice
 * of Node's shared 8 KiB pool, and keeping the slice would keep the whole slab alive, up to
 * ~40 times the bytes the ledger counts.
 */
function ownBytes(data: Payload): Payload {
  // new Uint8Array(view) copies the bytes; a Buffer's own slice() would share them.
  return typeof data !== 'string' && data.byteLength < data.buffer.byteLength
    ? new Uint8Array(data)
    : data;
}
