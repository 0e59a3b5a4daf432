import { jetstreamManager } from '@nats-io/jetstream';
import { Logger } from '@nestjs/common';
import type { AppConfig } from '../../src/config/app-config';
import { loadConfig } from '../../src/config/config.loader';
import type { JetStreamMetaStore } from '../../src/meta-registry/jetstream-meta-store';
import type { MetaRegistry } from '../../src/meta-registry/meta-registry.service';
import { makeKvRegistry } from '../../src/meta-registry/testing';
import type { NatsConnectionService } from '../../src/transport/nats-connection.service';

// These registries run without the app's logger: keep Nest's default one to errors.
Logger.overrideLogger(['error']);

let buckets = 0;
/** A bucket name no other test (or test process) uses. */
export const freshBucket = (tag = 't') => `${tag}_${process.pid}_${++buckets}`;

export interface KvRegistry {
  registry: MetaRegistry;
  store: JetStreamMetaStore;
  nats: NatsConnectionService;
  config: AppConfig;
  /** Stops the registry and the store; `destroy` also deletes the bucket. */
  close(options?: { destroy?: boolean }): Promise<void>;
}

/**
 * A registry on the JetStream KV store, wired without Nest, on its own NATS connection
 * (so two of them behave as two processes sharing a bucket). Waits until the bucket is
 * open and its watcher runs.
 */
export async function kvRegistry(
  natsUrl: string,
  env: Record<string, string>,
): Promise<KvRegistry> {
  const { config } = loadConfig({
    EPD_NATS_URL: natsUrl,
    EPD_REGISTRY_STORE: 'jetstream',
    EPD_REGISTRY_SWEEP_INTERVAL_MS: '100',
    ...env,
  });
  const { registry, store, nats, keeper } = await makeKvRegistry(config);
  return {
    registry,
    store,
    nats,
    config,
    async close({ destroy = true } = {}) {
      registry.close();
      store.onApplicationShutdown();
      keeper.onApplicationShutdown(); // or it could make the bucket deleted below again
      const nc = nats.current;
      if (destroy && nc && !nc.isClosed()) {
        const jsm = await jetstreamManager(nc);
        await jsm.streams.delete(`KV_${config.registry.kvBucket}`).catch(() => undefined);
      }
      await nats.onApplicationShutdown();
    },
  };
}
