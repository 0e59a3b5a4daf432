import { Global, Module } from '@nestjs/common';
import { Errors } from '../common/errors/error-catalogue';
import type { Owner } from '../meta-registry/meta-store';
import type { DpType } from '../transport/subjects';
import type { IpcReportTopic, IpcTopics } from '../transport/ipc-topics';

/**
 * This instance's DP workers as owner routing and the admin views see them: one more kind
 * of owner, and processes to ask about their state. The DP supervisor's are its workers
 * (DpDispatcher); a single process and a worker have none (NoLocalRanks).
 */
export abstract class LocalRanks {
  /** Whether this process dispatches to DP workers (a supervisor). */
  abstract readonly active: boolean;

  /** The rank an encode of `reqId` was dispatched to and has not answered yet. */
  abstract inflightOwner(reqId: string): Owner | undefined;

  /**
   * Calls `dp` on the worker named by `owner`, counted in its pending calls and failed at
   * once if it dies; 503 `owner_gone` when that worker process (by pid) is gone already.
   */
  abstract call<T>(
    owner: Owner,
    dp: DpType,
    reqId: string,
    body: object,
    deadline: number,
  ): Promise<T>;

  /**
   * Asks every worker over IPC (`type`: a report it answers): the answers, and for each rank
   * without one, why (a view then says what it leaves out).
   */
  abstract ask<K extends IpcReportTopic>(type: K): Promise<RanksAsked<IpcTopics[K]['reply']>>;

  /** The answers of ask(); the silent are left out. */
  async gather<K extends IpcReportTopic>(
    type: K,
  ): Promise<{ rank: number; value: IpcTopics[K]['reply'] }[]> {
    return (await this.ask(type)).answers;
  }
}

/** A rank a view leaves out: not alive, or no answer over IPC in time (the reason says which). */
export interface RankMissing {
  dp_rank: number;
  reason: string;
}

/** Every rank asked: the answers, and the ranks without one. */
export interface RanksAsked<T> {
  answers: { rank: number; value: T }[];
  missing: RankMissing[];
}

/** A process without DP workers: no rank owns anything, nothing to gather. */
export class NoLocalRanks extends LocalRanks {
  readonly active = false;

  inflightOwner(): undefined {
    return undefined;
  }

  call<T>(owner: Owner, dp: DpType, reqId: string): Promise<T> {
    return Promise.reject(Errors.ownerGone(`rank ${owner.rank} (${dp})`, reqId));
  }

  ask(): Promise<RanksAsked<never>> {
    return Promise.resolve({ answers: [], missing: [] });
  }
}

/** LocalRanks for a process without DP workers; global, as the supervisor's DispatchModule is. */
@Global()
@Module({
  providers: [{ provide: LocalRanks, useClass: NoLocalRanks }],
  exports: [LocalRanks],
})
export class NoLocalRanksModule {}
