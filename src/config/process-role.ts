import type { AppConfig } from './app-config';

/**
 * What this process is with DP workers (EPD_DP_SIZE): `single` encodes itself (DP 1);
 * `supervisor` serves HTTP and the plain subjects and dispatches to its workers;
 * `worker` is one of those, started by the supervisor.
 */
export type DpRole = 'single' | 'supervisor' | 'worker';

/** The role as the settings say; read once, by the composition root (app.module.ts, main.ts). */
export function dpRole(config: Pick<AppConfig, 'encoder'>): DpRole {
  if (config.encoder.dpWorker) return 'worker';
  return config.encoder.dpSize > 1 ? 'supervisor' : 'single';
}

/**
 * This process's DP role, decided once by the composition root and injected wherever a
 * fact of the role matters (the owner a record names, the subjects a worker serves).
 * What differs in behaviour is a port with one implementation per role, chosen there too
 * (LocalRanks, RequestsReport, the encoder side).
 */
export class ProcessRole {
  constructor(
    readonly role: DpRole,
    /** EPD_DP_RANK: a worker's rank; 0 in a single process. */
    readonly rank: number,
  ) {}

  get worker(): boolean {
    return this.role === 'worker';
  }

  get supervisor(): boolean {
    return this.role === 'supervisor';
  }

  get single(): boolean {
    return this.role === 'single';
  }

  /** A DP worker's rank, which names its own subjects; undefined in any other process. */
  get workerRank(): number | undefined {
    return this.worker ? this.rank : undefined;
  }
}
