import type { Readiness } from '../common/readiness';
import type { WorkerWaiting } from '../transport/ipc-topics';

/**
 * The DP supervisor's start: it serves (readiness condition `DP workers`) once every rank's
 * first worker has come up, died, or failed one of its own conditions, as SGLang's and
 * vLLM's DP front ends wait for every engine. A crash-looping rank, or one whose model does
 * not load, leaves the instance serving, degraded, on the others. Until then the condition
 * says, rank by rank, what each worker still waits for (its own report), not just "pending";
 * afterwards `notReady` keeps saying why a live worker is not taking calls.
 */
export class FirstStarts {
  private readonly starting: Set<number>;
  private allOver!: () => void;
  /** The last report of each rank's current worker, until it is ready (or replaced). */
  private readonly reports = new Map<number, WorkerWaiting>();

  constructor(ranks: number, readiness: Readiness) {
    this.starting = new Set(Array.from({ length: ranks }, (_, r) => r));
    readiness.require('DP workers', new Promise<void>((resolve) => (this.allOver = resolve)), () =>
      this.describe(),
    );
  }

  /** A rank's worker reported what it waits for; one that failed ends the rank's start (its report stays). */
  waiting(rank: number, report: WorkerWaiting): void {
    this.reports.set(rank, report);
    if (report.failed) this.startOver(rank);
  }

  /** A rank's worker came up, or exited: its report goes with it. */
  ended(rank: number): void {
    this.reports.delete(rank);
    this.startOver(rank);
  }

  private startOver(rank: number): void {
    if (!this.starting.delete(rank) || this.starting.size > 0) return;
    this.allOver();
  }

  /** Why each live worker that is not ready is not: its own report (ranks it reported for). */
  notReady(rank: number): Record<string, string> | null {
    return this.reports.get(rank)?.waiting_for ?? null;
  }

  private describe(): string {
    const ranks = [...this.starting].sort((a, b) => a - b);
    return ranks
      .map((r) => {
        const report = this.reports.get(r);
        if (!report) return `rank ${r}: starting`;
        const what = Object.entries(report.waiting_for).map(([name, why]) => `${name}: ${why}`);
        return `rank ${r} (pid ${report.pid}): ${what.join(', ') || 'starting'}`;
      })
      .join('; ');
  }
}
