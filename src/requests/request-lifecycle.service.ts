import { Injectable } from '@nestjs/common';
import { MetaRegistry } from '../meta-registry/meta-registry.service';
import { ReqStateStore, type ReleaseOutcome } from './req-state.store';

/**
 * The single release path for a req_id, used by NATS `release`, the admin route, and
 * delivery completion: frees the staged embedding (or defers it until the encode and
 * sends end, or leaves a tombstone) and drops the metadata, except an `{error}` entry,
 * which stays readable for waiters until its TTL.
 */
@Injectable()
export class RequestLifecycle {
  constructor(
    private readonly states: ReqStateStore,
    private readonly registry: MetaRegistry,
  ) {}

  /** `ack`: every receiver acked (delivery completion); `explicit`: a release call or the admin. */
  async release(reqId: string, reason: 'explicit' | 'ack' = 'explicit'): Promise<ReleaseOutcome> {
    const outcome = this.states.release(reqId, reason);
    if (outcome === 'deferred') return outcome;
    const entry = await this.registry.get(reqId);
    if (entry && !('error' in entry.metadata)) await this.registry.discard(reqId);
    return outcome;
  }
}
