import { registryContract } from '../../test/support/registry-contract';
import { makeRegistry } from './testing';

/** The registry suite that every store passes (test/registry-jetstream.e2e-spec.ts for KV). */
describe('MetaRegistry with the memory store', () => {
  registryContract((env) => {
    const { registry } = makeRegistry({ EPD_REGISTRY_SWEEP_INTERVAL_MS: '100', ...env });
    registry.onModuleInit();
    return Promise.resolve({ registry, close: () => Promise.resolve(registry.close()) });
  });
});
