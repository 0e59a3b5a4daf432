import { Clock } from '../common/clock';
import type { AppConfig } from '../config/app-config';
import { loadConfig } from '../config/config.loader';
import { BucketKeeper } from '../jetstream/bucket-keeper';
import { NatsConnectionService } from '../transport/nats-connection.service';
import { JetStreamMetaStore } from './jetstream-meta-store';
import { MemoryMetaStore } from './memory-meta-store';
import { MetaRegistry } from './meta-registry.service';
import type { MetaStore } from './meta-store';
import { ProcessOwner } from './process-owner';
import { restartMemoryFor } from './restart-memory';

/** A registry wired without Nest, for unit tests and benchmarks. */
export function makeRegistry(overrides: Record<string, string> = {}): {
  registry: MetaRegistry;
  config: AppConfig;
  store: MemoryMetaStore;
} {
  // No restart ledger unless a test asks for one: registries of parallel test files would
  // otherwise read each other's.
  const { config } = loadConfig({ EPD_RESTART_LEDGER: 'off', ...overrides });
  const store = new MemoryMetaStore(config.registry.maxEntries);
  // A process of its own, without DP workers: it keeps a ledger if configured.
  return { registry: singleProcessRegistry(store, config, true), config, store };
}

/** A single process's registry on `store`; with a restart ledger when `keepsLedger`. */
function singleProcessRegistry(
  store: MetaStore,
  config: AppConfig,
  keepsLedger: boolean,
): MetaRegistry {
  const clock = new Clock();
  return new MetaRegistry(
    store,
    config,
    clock,
    ProcessOwner.single(config.instance.id),
    restartMemoryFor(config, clock, keepsLedger),
  );
}

/**
 * A registry on the JetStream KV store, on its own NATS connection (so two of them behave
 * as two processes sharing a bucket), wired without Nest; resolves once the bucket is open
 * and watched. For tests, benchmarks and the two-process property test's peer process.
 */
export async function makeKvRegistry(config: AppConfig): Promise<{
  registry: MetaRegistry;
  store: JetStreamMetaStore;
  nats: NatsConnectionService;
  /** Makes the bucket again if it is deleted: stop it (onApplicationShutdown) before deleting it. */
  keeper: BucketKeeper;
}> {
  const nats = new NatsConnectionService(config);
  nats.onModuleInit();
  const keeper = new BucketKeeper(nats, new Clock());
  const store = new JetStreamMetaStore(keeper, config, new Clock());
  await store.ready();
  // A shared store keeps no ledger: the bucket outlives the process.
  const registry = singleProcessRegistry(store, config, false);
  registry.onModuleInit();
  return { registry, store, nats, keeper };
}
