import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import {
  Observable,
  Subject,
  TimeoutError,
  firstValueFrom,
  throwError,
  timeout,
  type Subscription,
} from 'rxjs';
import { Clock } from '../common/clock';
import { withTimeout } from '../common/timeout';
import { Errors } from '../common/errors/error-catalogue';
import { AppConfig } from '../config/app-config';
import { MetaStore, type Claim, type Owner, type StoredMeta } from './meta-store';
import { ProcessOwner } from './process-owner';
import { RestartMemory } from './restart-memory';
import { isErrorMeta, type MetaPayload } from './meta.schema';
import type { RegistryCounters, RegistryStats, WaitOptions } from './registry-types';

export type { RegistryCounters, RegistryStats, WaitOptions } from './registry-types';

/** Waiters of one req_id share one subject; it exists only while someone waits. */
interface Slot {
  readonly subject: Subject<StoredMeta>;
  waiters: number;
}

/**
 * Metadata registry: publish once, wake exactly the waiters of that req_id.
 *
 * Each req_id with pending waiters has its own Subject in a Map, so a publish costs
 * O(waiters of that req_id), never O(all waiters). Every wait is bounded by RxJS
 * `timeout()`; whatever ends it (value, published error, deadline, abort, shutdown,
 * unsubscribe) runs one teardown that drops the waiter and, with the last one, its slot.
 */
@Injectable()
export class MetaRegistry implements OnModuleInit {
  private readonly logger = new Logger(MetaRegistry.name);
  private readonly slots = new Map<string, Slot>();
  private pending = 0;
  private closed = false;
  /** Settles once every wait pending at close() was answered (close()). */
  private closing: Promise<void> = Promise.resolve();
  private sweepTimer?: NodeJS.Timeout;
  private changes?: Subscription;
  private sweeping = false;
  private readonly counters: Omit<RegistryCounters, 'cancelled'> = {
    publishes: 0,
    errorPublishes: 0,
    waits: 0,
    resolved: 0,
    timeouts: 0,
    rejected: 0,
    failed: 0,
    discards: 0,
    expired: 0,
  };

  constructor(
    private readonly store: MetaStore,
    private readonly config: AppConfig,
    private readonly clock: Clock,
    /** This process as an owner: what its records name, and how it knows its own. */
    private readonly owner: ProcessOwner,
    /** The embeddings the previous process held, and this one's for the next. */
    private readonly memory: RestartMemory,
  ) {}

  onModuleInit(): void {
    this.sweepTimer = setInterval(() => void this.sweep(), this.config.registry.sweepIntervalMs);
    this.sweepTimer.unref();
    this.memory.restore(this.store);
    // A shared store reports puts made anywhere (this process's included, which find
    // their slots already answered): each wakes only the waiters of its own req_id.
    this.changes = this.store.changes?.subscribe((record) => this.wake(record));
  }

  /**
   * The `close-registry` shutdown phase (src/common/shutdown-phases.ts): after the NATS
   * server left its queue groups, so that only calls already received get 503
   * shutting_down, never new ones, and after the handoff, which still publishes.
   */
  shutdown(): Promise<void> {
    this.close();
    return this.closing;
  }

  /** This process as the owner of what it encodes (ProcessOwner). */
  get self(): Owner {
    return this.owner.self;
  }

  /** Whether the previous process held `reqId`'s embedding when it stopped (and nothing since). */
  lostInRestart(reqId: string): boolean {
    return this.memory.lostInRestart(reqId);
  }

  /** Whether `owner` is this instance's previous process: an embedding it staged died with it. */
  stagedByEarlierProcess(owner: Owner | undefined): boolean {
    return this.owner.stagedByEarlierProcess(owner);
  }

  /**
   * `owner`: set by the encoder that stages the embedding (owner routing). `deadline`: the
   * call's; a shared store may take until then to accept the record (a leader election).
   */
  async publish(
    reqId: string,
    metadata: MetaPayload,
    partIdx?: number,
    owner?: Owner,
    deadline?: number,
  ): Promise<void> {
    if (this.closed) throw Errors.shuttingDown(reqId);
    const record: StoredMeta = {
      reqId,
      partIdx,
      metadata,
      publishedAt: this.clock.now(),
      ...(owner ? { owner } : {}),
    };
    await this.store.put(record, deadline);
    this.counters.publishes++;
    if (isErrorMeta(metadata)) this.counters.errorPublishes++;
    else this.memory.published(reqId); // encoded again since the restart
    this.memory.track(record);
    this.wake(record);
  }

  /**
   * Takes over `reqId`'s record for `owner` if it is still handed to an object store
   * (nobody took it over first): the takeover's compare-and-set, so one instance holds a
   * handed-off embedding. When another won, or the record is gone, says what is there.
   */
  async claimHanded(reqId: string, owner: Owner): Promise<Claim> {
    if (this.closed) throw Errors.shuttingDown(reqId);
    let record: StoredMeta | undefined;
    const claim = await this.store.claim(reqId, (now) =>
      now.owner?.store === undefined || isErrorMeta(now.metadata)
        ? undefined
        : (record = { ...now, owner, publishedAt: this.clock.now() }),
    );
    if (claim.won && record) this.memory.track(record);
    return claim;
  }

  /**
   * Undoes a takeover that could not read its object: `was` (the handed-off record) is put
   * back if the record still names this instance, so later calls are told what happened
   * to it rather than find an owner that holds nothing.
   */
  async unclaimHanded(was: StoredMeta): Promise<void> {
    const claim = await this.store.claim(was.reqId, (now) =>
      this.isSelf(now.owner) ? was : undefined,
    );
    if (claim.won) this.memory.untrack(was.reqId);
  }

  /** Whether `owner` is this process (instance, boot and rank), not another or an earlier one. */
  isSelf(owner: Owner | undefined): boolean {
    return this.owner.isSelf(owner);
  }

  private wake(record: StoredMeta): void {
    const slot = this.slots.get(record.reqId);
    if (!slot) return;
    // Every current waiter is answered by this record, so the slot ends here; a later
    // waiter starts a new one (and finds the record in the store).
    this.slots.delete(record.reqId);
    this.counters.resolved += slot.waiters;
    if (isErrorMeta(record.metadata)) {
      slot.subject.error(Errors.publishedError(record.metadata.error, record.reqId));
    } else {
      slot.subject.next(record);
      slot.subject.complete();
    }
  }

  /**
   * Emits the record once it is published (at once if it already is), then completes.
   * Errors: MMError 500 with the published text for an `{error}` entry, RxJS
   * TimeoutError at the deadline (the filter answers 504 "encode metadata not ready"),
   * 499 on abort, 503 when the registry is shutting down or at its waiter bound.
   *
   * Memory matters here (one of these per pending receiver), so the waiter's subscriber
   * is put straight into the slot's Subject and `timeout()` is the only operator.
   */
  wait$(reqId: string, options: WaitOptions = {}): Observable<StoredMeta> {
    const timeoutMs = options.timeoutMs ?? this.config.timeouts.reqTimeoutMs;
    const { signal } = options;
    return new Observable<StoredMeta>((subscriber) => {
      // Closed: no new waiter is parked, but a record already published is still the
      // answer (a call received just before the shutdown began).
      if (this.closed) return void this.answerClosed(reqId, subscriber, 0);
      if (this.pending >= this.config.registry.maxWaiters) {
        this.counters.rejected++;
        return subscriber.error(Errors.tooManyWaiters(this.config.registry.maxWaiters, reqId));
      }
      if (signal?.aborted) return subscriber.error(Errors.waitCancelled(reqId));

      this.counters.waits++;
      this.pending++;
      let slot = this.slots.get(reqId);
      if (!slot) {
        slot = { subject: new Subject<StoredMeta>(), waiters: 0 };
        this.slots.set(reqId, slot);
      }
      slot.waiters++;
      const ownSlot = slot;
      ownSlot.subject.subscribe(subscriber);

      // Read the store only after joining the slot: a publish that lands between the
      // two is then seen by one of them, never by neither.
      this.store.get(reqId).then(
        (record) => {
          if (!record || subscriber.closed) return;
          this.counters.resolved++;
          if (isErrorMeta(record.metadata)) {
            subscriber.error(Errors.publishedError(record.metadata.error, reqId));
          } else {
            subscriber.next(record);
            subscriber.complete();
          }
        },
        (err: unknown) => {
          this.counters.failed++;
          subscriber.error(err);
        },
      );

      const onAbort = signal && (() => subscriber.error(Errors.waitCancelled(reqId)));
      if (onAbort) signal.addEventListener('abort', onAbort, { once: true });

      return () => {
        if (onAbort) signal.removeEventListener('abort', onAbort);
        this.pending--;
        if (--ownSlot.waiters === 0 && this.slots.get(reqId) === ownSlot) this.slots.delete(reqId);
      };
    }).pipe(timeout({ first: timeoutMs, with: this.onTimeout }));
  }

  private readonly onTimeout = () => {
    this.counters.timeouts++;
    return throwError(() => new TimeoutError());
  };

  wait(reqId: string, options?: WaitOptions): Promise<StoredMeta> {
    return firstValueFrom(this.wait$(reqId, options));
  }

  async has(reqId: string): Promise<boolean> {
    return (await this.store.get(reqId)) !== undefined;
  }

  get(reqId: string): Promise<StoredMeta | undefined> {
    return this.store.get(reqId);
  }

  /** The record as the store holds it now, never a possibly lagging mirror (MetaStore.latest). */
  latest(reqId: string): Promise<StoredMeta | undefined> {
    return this.store.latest(reqId);
  }

  /** Drops the entry; waiters stay parked (a later publish for the same id still wakes them). */
  async discard(reqId: string): Promise<boolean> {
    const removed = await this.store.delete(reqId);
    if (removed) this.counters.discards++;
    this.memory.untrack(reqId);
    return removed;
  }

  /** Drops entries older than EPD_SEND_TIMEOUT_MS. Runs on a timer; callable from tests. */
  async sweep(): Promise<number> {
    if (this.sweeping) return 0;
    this.sweeping = true;
    try {
      const expired = await this.store.expire(
        this.clock.now() - this.config.timeouts.sendTimeoutMs,
      );
      this.counters.expired += expired.length;
      for (const reqId of expired) this.memory.untrack(reqId);
      if (expired.length > 0)
        this.logger.debug({ count: expired.length }, 'expired metadata entries');
      this.memory.sweep();
      return expired.length;
    } catch (err) {
      this.logger.error({ err }, 'metadata TTL sweep failed; retrying on the next tick');
      return 0;
    } finally {
      this.sweeping = false;
    }
  }

  async stats(): Promise<RegistryStats> {
    const store = await this.store.stats();
    return {
      entries: store.entries,
      waiters: this.pending,
      waitedReqIds: this.slots.size,
      oldestAgeMs:
        store.oldestPublishedAt === undefined ? null : this.clock.now() - store.oldestPublishedAt,
      maxEntries: this.config.registry.maxEntries,
      maxWaiters: this.config.registry.maxWaiters,
      ...(this.memory.ledger ? { restartLedger: this.memory.ledger.stats } : {}),
      ...(store.shared ? { sharedStore: store.shared } : {}),
      counters: {
        ...this.counters,
        // Every admitted wait ends in exactly one way; what is neither pending nor
        // answered, timed out or failed was cancelled by its caller.
        cancelled:
          this.counters.waits -
          this.pending -
          this.counters.resolved -
          this.counters.timeouts -
          this.counters.failed,
      },
    };
  }

  /**
   * Refuses new waiters and ends every pending wait: with its record if one was published
   * (a wait that joined its slot just before, and whose own read had not answered yet),
   * else 503 "encoder shutting down". `closing` settles when all are answered.
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.sweepTimer);
    this.changes?.unsubscribe();
    this.memory.stop();
    const pending = [...this.slots.entries()];
    this.slots.clear();
    this.closing = Promise.all(
      pending.map(([reqId, slot]) => this.answerClosed(reqId, slot.subject, slot.waiters)),
    ).then((answered) => {
      const failed = answered.filter((ok) => !ok).length;
      if (failed > 0)
        this.logger.log({ slots: failed }, 'failed pending metadata waits: shutting down');
    });
  }

  /** How long a closing registry reads the store for a wait's answer before it gives up. */
  private static readonly CLOSE_READ_MS = 500;

  /** After close: the published record, if any, else 503 shutting_down. True if answered. */
  private async answerClosed(
    reqId: string,
    to: { next(r: StoredMeta): void; complete(): void; error(e: unknown): void },
    waiters = 1,
  ): Promise<boolean> {
    const record = await withTimeout(
      this.store.get(reqId),
      MetaRegistry.CLOSE_READ_MS,
      () => new Error('store read timed out'),
    ).catch(() => undefined);
    if (record && !isErrorMeta(record.metadata)) {
      this.counters.resolved += waiters;
      to.next(record);
      to.complete();
      return true;
    }
    this.counters.failed += waiters;
    to.error(Errors.shuttingDown(reqId));
    return false;
  }

  get isClosed(): boolean {
    return this.closed;
  }
}
