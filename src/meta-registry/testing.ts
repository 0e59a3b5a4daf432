import { Clock } from '../common/clock';
import type { AppConfig } from '../config/app-config';
import { loadConfig } from '../config/config.loader';
import { MemoryMetaStore } from './memory-meta-store';
import { MetaRegistry } from './meta-registry.service';

/** A registry wired without Nest, for unit tests and benchmarks. */
export function makeRegistry(overrides: Record<string, string> = {}): {
  registry: MetaRegistry;
  config: AppConfig;
  store: MemoryMetaStore;
} {
  const { config } = loadConfig({ ...overrides });
  const store = new MemoryMetaStore(config.registry.maxEntries);
  const registry = new MetaRegistry(store, config, new Clock());
  return { registry, config, store };
}
