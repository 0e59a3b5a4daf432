import { Injectable, Logger } from '@nestjs/common';
import { LifecycleEvents } from '../common/lifecycle-events';
import { MetaRegistry } from '../meta-registry/meta-registry.service';
import { ReqStateStore, type ReleaseOutcome } from './req-state.store';

/**
 * The single release path for a req_id, used by NATS `release`, the admin route, and
 * delivery completion: frees the staged embedding (or defers it until the encode and
 * sends end, or leaves a tombstone) and drops the metadata, except an `{error}` entry,
 * which stays readable for waiters until its TTL. A deferred release drops the metadata
 * when it is applied: before, it stayed until its TTL (found by the staging slab's test:
 * the registry did not drain after a release that waited for a send).
 */
@Injectable()
export class RequestLifecycle {
  private readonly logger = new Logger('RequestLifecycle');

  constructor(
    private readonly states: ReqStateStore,
    private readonly registry: MetaRegistry,
    events: LifecycleEvents,
  ) {
    events.on('release.deferred-applied', (reqId) => {
      this.dropMetadata(reqId).catch((err: unknown) =>
        this.logger.warn(
          { req_id: reqId, err },
          'could not drop the metadata of a released req_id',
        ),
      );
    });
  }

  /** `ack`: every receiver acked (delivery completion); `explicit`: a release call or the admin. */
  async release(reqId: string, reason: 'explicit' | 'ack' = 'explicit'): Promise<ReleaseOutcome> {
    const outcome = this.states.release(reqId, reason);
    if (outcome === 'deferred') return outcome;
    await this.dropMetadata(reqId);
    return outcome;
  }

  private async dropMetadata(reqId: string): Promise<void> {
    const entry = await this.registry.get(reqId);
    if (entry && !('error' in entry.metadata)) await this.registry.discard(reqId);
  }
}
