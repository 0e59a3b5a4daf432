import type { Logger } from '@nestjs/common';
import type { KvBucket, KvChanges, KvValue } from '../jetstream/kv-bucket';
import type { Subject } from 'rxjs';
import { backoffMs, sleep } from '../common/backoff';
import { reqIdOf } from './kv-codec';
import type { KvMirror } from './kv-mirror';
import type { StoredMeta } from './meta-store';

/**
 * The process's one watcher of the metadata bucket: every put made anywhere into the
 * mirror and out on `changes` (the registry wakes that key's waiters). nats.js' ordered
 * consumer already heals gaps; when it ends anyway (consumer lost, server restarted, the
 * bucket deleted), a new one starts after the last revision seen, so a put made meanwhile
 * is still delivered.
 */
export class KvWatch {
  private watcher?: KvChanges;
  private lastRevision = 0;
  /** Whether a watcher runs (puts made from now on reach `changes`). */
  watching = false;

  constructor(
    private readonly mirror: KvMirror,
    private readonly changes: Subject<StoredMeta>,
    private readonly logger: Logger,
    private readonly stopping: AbortSignal,
  ) {}

  /**
   * Watches until the process stops. `bucket`: the bucket now (opened or made again);
   * `started`: told each time a watcher runs; `ended`: after a watcher ended (is the
   * bucket gone?).
   */
  async run(
    bucket: () => Promise<KvBucket>,
    started: () => void,
    ended: () => Promise<unknown>,
  ): Promise<void> {
    let attempt = 0;
    while (!this.stopping.aborted) {
      try {
        const kv = await bucket();
        const resume = this.lastRevision > 0 ? this.lastRevision + 1 : 0;
        // A new watcher may have a gap behind it: the mirror starts again from here.
        this.mirror.forget();
        const watcher = await kv.watch({
          ignoreDeletes: true,
          ...(resume > 0 ? { resumeFromRevision: resume } : { include: 'updates' as const }),
        });
        this.watcher = watcher;
        this.watching = true;
        started();
        attempt = 0;
        for await (const e of watcher) this.apply(e);
      } catch (err) {
        if (this.stopping.aborted) return;
        this.logger.warn(
          { err: (err as Error).message, resumeAfterRevision: this.lastRevision },
          'KV watcher stopped; restarting it',
        );
      }
      // A watcher ends when its stream goes: the bucket may have been deleted.
      await ended();
      if (this.stopping.aborted) return;
      const delay = backoffMs(++attempt, { baseMs: 100, maxMs: 2_000, jitter: 0.5 });
      await sleep(delay, this.stopping).catch(() => undefined);
    }
  }

  /** The bucket was made again: its watcher starts from the first revision (see `stop`). */
  reset(): void {
    this.watching = false;
    this.lastRevision = 0;
  }

  /** Ends the watcher that runs (the loop starts another unless the process stops). */
  stop(): void {
    this.watcher?.stop();
  }

  /** One watched entry into the mirror, and out on `changes`. */
  private apply(e: KvValue): void {
    this.lastRevision = e.revision;
    const reqId = reqIdOf(e.key);
    if (reqId === undefined) return; // not one of ours
    const record = this.mirror.apply(reqId, e.revision, e.operation, e.value);
    if (record) this.changes.next(record);
  }
}
