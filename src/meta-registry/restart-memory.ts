import { Logger } from '@nestjs/common';
import { Clock } from '../common/clock';
import { Errors } from '../common/errors/error-catalogue';
import type { AppConfig } from '../config/app-config';
import type { MetaStore, StoredMeta } from './meta-store';
import { isErrorMeta } from './meta.schema';
import { RestartLedger } from './restart-ledger';
import { BOOT_ID } from '../common/boot-id';

/** How often the restart ledger is rewritten after a change. */
const LEDGER_INTERVAL_MS = 200;

/**
 * What a restart must not hide (crash honesty): the embeddings this process stages, kept
 * in its restart ledger for the next process, and those the previous process held, which
 * died with it. Only with a ledger (the memory store, outside a DP worker, whose records
 * live on in its supervisor: decided in meta-registry.module.ts); without one it
 * remembers nothing.
 */
export class RestartMemory {
  private readonly logger = new Logger('MetaRegistry');
  /** req_ids whose embeddings the previous process held: req_id → until (epoch ms). */
  private readonly lost = new Map<string, number>();
  /**
   * The req_ids whose embeddings this instance stages (its own records, or its DP
   * workers': metadata, not errors) → their TTL's end, kept as records come and go.
   * Metadata others published here (publish_metadata) names no owner of ours: its
   * embedding is not ours to call lost, and it neither rewrites the ledger nor is visited
   * when the ledger is written (a registry holds up to EPD_REGISTRY_MAX_ENTRIES).
   */
  private readonly owned = new Map<string, number>();

  constructor(
    private readonly config: AppConfig,
    private readonly clock: Clock,
    readonly ledger?: RestartLedger,
  ) {}

  /**
   * The embeddings the previous process held (its restart ledger) died with it: each gets
   * a record in `store` with that error, so a wait_metadata learns it at once, and calls
   * for it are refused with it (lostInRestart) until a new encode of the req_id publishes
   * again. Then the ledger starts keeping this process's.
   */
  restore(store: MetaStore): void {
    const ledger = this.ledger;
    if (!ledger) return;
    const now = this.clock.now();
    const previous = ledger.previous(now);
    for (const [reqId, until] of previous) {
      this.lost.set(reqId, until);
      const { message } = Errors.embeddingLost(reqId);
      // A registry already full (a smaller EPD_REGISTRY_MAX_ENTRIES than before) keeps no
      // record for the rest; calls for them are still refused through `lost`.
      store.put({ reqId, metadata: { error: message }, publishedAt: now }).catch(() => undefined);
    }
    if (previous.length > 0) {
      this.logger.warn(
        { count: previous.length, ledger: ledger.path },
        `${previous.length} staged embedding(s) of the previous process were lost in the restart`,
      );
    }
    try {
      ledger.start(
        () => this.owned.entries(),
        (err) => this.logger.error({ err, ledger: ledger.path }, 'restart ledger write failed'),
      );
    } catch (err) {
      // An unwritable state dir costs the next process its honesty, not this one its start.
      this.logger.error(
        { err, ledger: ledger.path },
        'restart ledger unavailable: after a restart, calls for lost embeddings will not be told so',
      );
    }
  }

  /** A record stored: into or out of the owned set (see `owned`), the ledger told if it changed. */
  track(record: StoredMeta): void {
    if (!this.ledger) return;
    if (record.owner?.instance === this.config.instance.id && !isErrorMeta(record.metadata)) {
      this.owned.set(record.reqId, record.publishedAt + this.config.timeouts.sendTimeoutMs);
      this.ledger.changed();
    } else {
      this.untrack(record.reqId);
    }
  }

  untrack(reqId: string): void {
    if (this.owned.delete(reqId)) this.ledger?.changed();
  }

  /** Published again since the restart: no longer lost. */
  published(reqId: string): void {
    this.lost.delete(reqId);
  }

  /** Whether the previous process held `reqId`'s embedding when it stopped (and nothing since). */
  lostInRestart(reqId: string): boolean {
    const until = this.lost.get(reqId);
    return until !== undefined && until > this.clock.now();
  }

  /** Forgets lost req_ids past their TTL (the registry's sweep). */
  sweep(): void {
    const now = this.clock.now();
    for (const [reqId, until] of this.lost) if (until <= now) this.lost.delete(reqId);
  }

  /** The last write, at close: what this process still stages. */
  stop(): void {
    try {
      this.ledger?.stop(this.owned.entries());
    } catch (err) {
      this.logger.error({ err, ledger: this.ledger?.path }, 'restart ledger write failed');
    }
  }
}

/**
 * The restart memory of a registry: with a ledger at EPD_RESTART_LEDGER (or its default
 * path; none when `off`) when `keepsLedger` (the memory store, outside a DP worker).
 */
export function restartMemoryFor(
  config: AppConfig,
  clock: Clock,
  keepsLedger: boolean,
): RestartMemory {
  const path = keepsLedger
    ? RestartLedger.pathFor(
        config.registry.restartLedger,
        config.nats.subjectPrefix,
        config.http.port,
      )
    : undefined;
  const ledger = path ? new RestartLedger(path, BOOT_ID, LEDGER_INTERVAL_MS, clock) : undefined;
  return new RestartMemory(config, clock, ledger);
}
