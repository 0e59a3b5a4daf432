import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { AppModule } from '../../src/app.module';
import { configureApp, startApp } from '../../src/bootstrap';
import { AppConfig } from '../../src/config/app-config';
import { loadConfig } from '../../src/config/config.loader';
import { MetaStore } from '../../src/meta-registry/meta-store';
import { MetaRegistry } from '../../src/meta-registry/meta-registry.service';
import { leftOpen } from './left-open';
import { sharedNatsUrl, uniquePrefix } from './shared-nats';

export { sharedNatsUrl, uniquePrefix };

export interface TestApp {
  app: INestApplication;
  config: AppConfig;
  httpUrl: string;
  registry: MetaRegistry;
  close(): Promise<void>;
}

/**
 * Starts the real app (same wiring as main.ts) on an ephemeral HTTP port. `env` is layered
 * over config/test.yaml exactly as EPD_* variables are in production.
 */
export async function startTestApp(
  env: Record<string, string> = {},
  options: { waitForNats?: boolean } = {},
): Promise<TestApp> {
  const { config } = loadConfig({
    NODE_ENV: 'test',
    EPD_HTTP_PORT: '0',
    EPD_NATS_URL: env.EPD_NATS_URL ?? sharedNatsUrl(),
    EPD_SUBJECT_PREFIX: uniquePrefix(),
    ...env,
  });
  const moduleRef = await Test.createTestingModule({
    imports: [AppModule.withConfig(config)],
  }).compile();
  const app = moduleRef.createNestApplication({ bufferLogs: true, bodyParser: false });
  configureApp(app, { shutdownHooks: false });
  const { httpUrl, natsReady } = await startApp(app);
  if (options.waitForNats !== false) {
    await natsReady;
    await app.get(MetaStore).ready(); // a shared store: its bucket open and watched
  } else natsReady.catch(() => undefined);
  return {
    app,
    config,
    httpUrl,
    registry: app.get(MetaRegistry),
    close: leftOpen({ close: () => app.close() }),
  };
}
