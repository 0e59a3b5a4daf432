import type { LoadSnapshot } from '../../common/load';

interface Bucket {
  second: number;
  arrived: number;
  completed: number;
  busyMs: number;
}

/**
 * The encoder's own load, for the autoscaling signal: arrivals, completions and busy time
 * in one-second buckets over the last `windowS` (EPD_SCALE_WINDOW_S; a ring: bounded), and the requests in
 * flight (bounded by EPD_MAX_PENDING). The service rate is measured at the mix actually
 * served, not configured: a slow mix lowers it, and the rule asks for more encoders.
 */
export class LoadMeter {
  private readonly ring: Bucket[] = [];
  private readonly inFlight = new Map<number, { at: number; items: number }>();
  private seq = 0;
  private busySince?: number;
  /** The last service rate measured: an idle window keeps it (what an encoder serves). */
  private lastServiceRate = 0;

  constructor(
    private readonly now: () => number,
    private readonly windowS: number,
  ) {}

  /** A request of `items` was admitted; its ticket goes to done(). */
  arrive(items: number): number {
    const now = this.now();
    if (this.inFlight.size === 0) this.busySince = now;
    this.bucket(now).arrived += items;
    this.inFlight.set(++this.seq, { at: now, items });
    return this.seq;
  }

  /** A request of `items` was refused at admission: demand all the same. */
  refused(items: number): void {
    this.bucket(this.now()).arrived += items;
  }

  /** The request was answered: its items count as served when it succeeded. */
  done(ticket: number, served: boolean): void {
    const entry = this.inFlight.get(ticket);
    if (!entry) return;
    this.inFlight.delete(ticket);
    const now = this.now();
    if (served) this.bucket(now).completed += entry.items;
    if (this.inFlight.size === 0) this.closeBusy(now);
  }

  snapshot(): LoadSnapshot {
    const now = this.now();
    if (this.busySince !== undefined) {
      this.closeBusy(now);
      this.busySince = now;
    }
    const from = Math.floor(now / 1000) - this.windowS + 1;
    let arrived = 0;
    let completed = 0;
    let busyMs = 0;
    for (const b of this.ring) {
      if (b.second < from) continue;
      arrived += b.arrived;
      completed += b.completed;
      busyMs += b.busyMs;
    }
    let oldest = now;
    let queued = 0;
    for (const e of this.inFlight.values()) {
      oldest = Math.min(oldest, e.at);
      queued += e.items;
    }
    const r3 = (x: number) => Math.round(x * 1000) / 1000;
    if (busyMs > 0 && completed > 0) this.lastServiceRate = r3(completed / (busyMs / 1000));
    return {
      arrival_rate: r3(arrived / this.windowS),
      service_rate: this.lastServiceRate,
      queue_depth: queued,
      oldest_queued_ms: now - oldest,
    };
  }

  /** Busy time since busySince, into the current second's bucket. */
  private closeBusy(now: number): void {
    if (this.busySince === undefined) return;
    this.bucket(now).busyMs += now - this.busySince;
    this.busySince = undefined;
  }

  private bucket(now: number): Bucket {
    const second = Math.floor(now / 1000);
    const last = this.ring[this.ring.length - 1];
    if (last?.second === second) return last;
    const b = { second, arrived: 0, completed: 0, busyMs: 0 };
    this.ring.push(b);
    while (this.ring.length > this.windowS) this.ring.shift();
    return b;
  }
}
