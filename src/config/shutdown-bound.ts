import type { EpdConfigShape } from './config.schema';

/**
 * How long a SIGTERM may take at most before the process exits on its own (with 1): the
 * NATS drain's grace, plus the handoff of staged embeddings to the object store when the
 * cache tier is JetStream, plus half a second. Whatever stops the process (a test harness,
 * Kubernetes' terminationGracePeriodSeconds) must wait at least this long before a SIGKILL,
 * or it kills a drain that was still handing embeddings over.
 */
export function shutdownBoundMs(config: Pick<EpdConfigShape, 'shutdown' | 'cache'>): number {
  const handoffMs = config.cache.store === 'jetstream' ? config.shutdown.drainMs : 0;
  return config.shutdown.graceMs + handoffMs + 500;
}
