import type { StoreStats } from './meta-store';
import type { RestartLedger } from './restart-ledger';

export interface WaitOptions {
  /** Deadline for this wait; the registry's default is EPD_REQ_TIMEOUT_MS. */
  timeoutMs?: number;
  /** Aborting ends the wait with a 499 "metadata wait cancelled" and frees its slot. */
  signal?: AbortSignal;
}

export interface RegistryCounters {
  publishes: number;
  errorPublishes: number;
  /** Waits admitted (refused ones count in `rejected`). */
  waits: number;
  /** Waits answered by published metadata or a published error. */
  resolved: number;
  timeouts: number;
  /** Waits ended by their caller (abort or unsubscribe); derived, see stats(). */
  cancelled: number;
  /** Waits refused at admission: waiter bound reached or shutting down. */
  rejected: number;
  /** Waits failed by shutdown or a store error. */
  failed: number;
  discards: number;
  expired: number;
}

export interface RegistryStats {
  entries: number;
  waiters: number;
  waitedReqIds: number;
  oldestAgeMs: number | null;
  maxEntries: number;
  maxWaiters: number;
  counters: RegistryCounters;
  /** The restart ledger (memory store, EPD_RESTART_LEDGER not `off`). */
  restartLedger?: RestartLedger['stats'];
  /** The shared store's local state (EPD_REGISTRY_STORE=jetstream). */
  sharedStore?: NonNullable<StoreStats['shared']>;
}
