import type { Owner } from '../meta-registry/meta-store';
import type { DpType } from '../transport/subjects';
import type { IpcReportTopic, IpcTopics } from '../transport/ipc-topics';

/**
 * This instance's DP workers as owner routing and the admin views see them: one more kind
 * of owner, and processes to ask about their state. Provided by the DP supervisor
 * (EPD_DP_SIZE > 1); absent in a single process and in a worker.
 */
export abstract class LocalRanks {
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

  /** Asks every live worker over IPC (`type`: a report it answers); the silent are left out. */
  abstract gather<K extends IpcReportTopic>(
    type: K,
  ): Promise<{ rank: number; value: IpcTopics[K]['reply'] }[]>;
}
