import type { Subscription } from '@nats-io/transport-node';

/** What the overload gate needs of the membership: step out, come back, and which one it is in. */
export interface StepOut {
  readonly out: boolean;
  leave(): void;
  rejoin(): void;
}

export interface MembershipStats {
  /** Whether the shared subjects' subscriptions are withdrawn right now. */
  out: boolean;
  /** Times this process stepped out of the queue group. */
  stepOuts: number;
  /** Total time spent out of the group, ms (the current stretch included). */
  outMs: number;
  /** Times a step-out was wanted but refused: no other member was known to stay in. */
  stayedIn: number;
}

interface Member {
  subscribe: () => Subscription;
  sub?: Subscription;
}

/**
 * This process's subscriptions to the shared, queue-group subjects of the dp_types that
 * may be shed, which it can withdraw and restore: the second stage of load shedding.
 *
 * Refusing a call costs a fraction of answering it (the message is still read, parsed and
 * answered on the one event-loop thread), so at twice the sustainable rate a process that
 * only refuses spends much of its time refusing (bench/results/overload.md measures what a
 * shed answer costs, and the ok rate that leaves). Out of the group, the NATS server no longer routes the shared subjects'
 * calls here at all: it gives them to the other instances of the group, or, when there
 * are none, answers each caller itself at once with its 503 "no responders" status. Calls
 * this process had already received are still answered (a subscription is drained: its
 * UNSUB, then a flush, and only then is it closed). Per-instance and per-rank subjects,
 * where owners are reached, and `release` stay subscribed throughout.
 *
 * `maxOutMs` bounds a stretch out of the group whatever else happens.
 *
 * Never as the last member: for a lone instance, stepping out is an outage (every caller
 * gets "no responders" until it rejoins; a burst of 10,000 waits and their publishes on
 * one instance failed whole). A step-out happens only while `othersStay` says another
 * member stays in the group (the instance roster's anchor rule); until told, it says no.
 */
export class QueueGroupMembership implements StepOut {
  private readonly members: Member[] = [];
  private isOut = false;
  private closed = false;
  private since = 0;
  private fallback?: NodeJS.Timeout;
  private stepOuts = 0;
  private outMs = 0;
  private stayedIn = 0;
  private othersStay: () => boolean = () => false;

  constructor(
    private readonly maxOutMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  get out(): boolean {
    return this.isOut;
  }

  get stats(): MembershipStats {
    const current = this.isOut ? this.now() - this.since : 0;
    return {
      out: this.isOut,
      stepOuts: this.stepOuts,
      outMs: Math.round(this.outMs + current),
      stayedIn: this.stayedIn,
    };
  }

  /** Who says whether another member stays in the group while this one is out. */
  stepOutWhen(othersStay: () => boolean): void {
    this.othersStay = othersStay;
  }

  /** Subscribes now, and again after each stretch out of the group. */
  add(subscribe: () => Subscription): void {
    const member: Member = { subscribe };
    if (!this.isOut && !this.closed) member.sub = subscribe();
    this.members.push(member);
  }

  leave(): void {
    if (this.isOut || this.closed || this.members.length === 0) return;
    if (!this.othersStay()) {
      this.stayedIn++;
      return;
    }
    this.isOut = true;
    this.since = this.now();
    this.stepOuts++;
    for (const m of this.members) {
      // A connection closing under us drains nothing more; the rejoin then finds it closed.
      m.sub?.drain().catch(() => undefined);
      m.sub = undefined;
    }
    this.fallback = setTimeout(() => this.rejoin(), this.maxOutMs);
    this.fallback.unref();
  }

  rejoin(): void {
    if (!this.isOut) return;
    this.isOut = false;
    this.outMs += this.now() - this.since;
    clearTimeout(this.fallback);
    this.fallback = undefined;
    if (this.closed) return;
    for (const m of this.members) {
      try {
        m.sub = m.subscribe();
      } catch {
        // The connection is closed (shutdown): there is nothing to rejoin.
      }
    }
  }

  /**
   * Out of the group for good (shutdown): every subscription drained (its UNSUB sent and
   * flushed, the calls already received still answered), and no rejoin after.
   */
  async leaveForGood(): Promise<void> {
    this.close();
    const drains: Promise<void>[] = [];
    for (const m of this.members) {
      if (m.sub) drains.push(m.sub.drain().catch(() => undefined));
      m.sub = undefined;
    }
    await Promise.all(drains);
  }

  /** No rejoin after this (the server is closing). */
  close(): void {
    this.closed = true;
    clearTimeout(this.fallback);
    this.fallback = undefined;
  }
}
