import type { Logger } from '@nestjs/common';
import { backoffMs, sleep } from '../common/backoff';
import { MAX_TOMBSTONES } from './kv-mirror';

/**
 * The purges of deleted keys the stream has not accepted yet (a stream without a leader
 * answers nothing until one is elected), oldest first, each sent again until it lands or
 * the process stops; the bucket's max age removes what is left then. Bounded: past
 * MAX_TOMBSTONES, the oldest are left to the max age.
 */
export class KeyPurges {
  /** key → the revision to purge up to. */
  private readonly pending = new Map<string, number>();
  private running?: Promise<void>;

  constructor(
    /** One purge of `key`'s messages up to `revision`, bounded; throws if not accepted. */
    private readonly purgeKey: (key: string, revision: number) => Promise<void>,
    private readonly stopping: AbortSignal,
    private readonly logger: Logger,
  ) {}

  get size(): number {
    return this.pending.size;
  }

  /** Purges `key` up to `revision` in the background (a later revision replaces it). */
  later(key: string, revision: number): void {
    this.pending.delete(key);
    this.pending.set(key, revision);
    if (this.pending.size > MAX_TOMBSTONES) this.pending.delete(this.pending.keys().next().value!);
    this.running ??= this.run().finally(() => (this.running = undefined));
  }

  private async run(): Promise<void> {
    let attempt = 0;
    while (this.pending.size > 0 && !this.stopping.aborted) {
      const [key, revision] = this.pending.entries().next().value!;
      try {
        await this.purgeKey(key, revision);
        attempt = 0;
        if (this.pending.get(key) === revision) this.pending.delete(key);
      } catch (err) {
        if (attempt++ === 0) {
          this.logger.warn(
            { key, err: (err as Error).message, pending: this.pending.size },
            'purge of a deleted key not accepted yet; sending it again',
          );
        }
        const delay = backoffMs(attempt, { baseMs: 100, maxMs: 1_000, jitter: 0.5 });
        await sleep(delay, this.stopping).catch(() => undefined);
      }
    }
  }
}
