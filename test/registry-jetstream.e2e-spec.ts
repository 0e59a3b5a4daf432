import { sharedNatsUrl } from './support/app';
import { freshBucket, kvRegistry } from './support/kv-registry';
import { registryContract } from './support/registry-contract';

/** The registry suite the memory store passes (src/meta-registry), against JetStream KV. */
describe('MetaRegistry with the JetStream KV store (e2e, real nats-server)', () => {
  registryContract(async (env) => {
    const r = await kvRegistry(sharedNatsUrl(), { EPD_KV_BUCKET: freshBucket('contract'), ...env });
    return { registry: r.registry, close: () => r.close() };
  });
});
