import { Injectable, Logger } from '@nestjs/common';
import { Listeners } from './listeners';
import type { ReleaseReason, WaitOutcome } from './kernel';
import type { LoadSnapshot } from './load';

/**
 * What happens in a request's life that other parts of the service follow (the metrics so
 * far), by name, with typed payloads. Emitters and listeners know the
 * event, never each other: a listener is added in its own constructor (or onModuleInit),
 * any number per event, and one that throws does not stop the others or the emitter.
 */
export interface LifecycleEventMap {
  /** A forward ran: the requests and the media items fused into it (probes aside). */
  'forward.completed': [requests: number, items: number];
  /** A wait_metadata ended: how, and after how many seconds. */
  'wait.completed': [outcome: WaitOutcome, seconds: number];
  /** One object store operation (the cache's second level, the staged bucket) and its seconds. */
  'object-store.op': [op: 'get' | 'put' | 'delete', seconds: number];
  /** A delivery attempt that reached the wire ended: acked or failed, after how many seconds. */
  'send.completed': [outcome: 'acked' | 'failed', seconds: number];
  /**
   * The encode pipeline's requests admitted and not yet answered, after each change (0: no
   * request in it; the object store writes in that time only).
   */
  'pipeline.pending': [pending: number];
  /** A request's state ended (released, expired, failed), once, and why. */
  'request.ended': [reqId: string, reason: ReleaseReason];
  /** A release that waited behind an encode or a send was applied. */
  'release.deferred-applied': [reqId: string];
  /** This instance's load, measured (once a heartbeat): its roster heartbeat carries it. */
  'load.measured': [load: LoadSnapshot];
}

export type LifecycleEvent = keyof LifecycleEventMap;

@Injectable()
export class LifecycleEvents {
  private readonly logger = new Logger('LifecycleEvents');
  private readonly listeners = new Map<LifecycleEvent, Listeners<unknown[]>>();

  /** Adds `listener` to `event`; the returned function removes it. */
  on<E extends LifecycleEvent>(
    event: E,
    listener: (...payload: LifecycleEventMap[E]) => void,
  ): () => void {
    let set = this.listeners.get(event);
    if (!set) {
      set = new Listeners((err) => this.logger.error({ err, event }, 'an event listener failed'));
      this.listeners.set(event, set);
    }
    return set.add(listener as (...payload: unknown[]) => void);
  }

  emit<E extends LifecycleEvent>(event: E, ...payload: LifecycleEventMap[E]): void {
    this.listeners.get(event)?.emit(...payload);
  }

  /** Listeners of `event` now (for tests and the admin view). */
  count(event: LifecycleEvent): number {
    return this.listeners.get(event)?.size ?? 0;
  }
}
