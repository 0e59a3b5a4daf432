import { Global, Module } from '@nestjs/common';
import { AppConfig } from './app-config';
import { loadConfig } from './config.loader';

/**
 * Hand-written rather than @nestjs/config: we need YAML layering, one zod schema and a
 * single typed object, and the config is read when the app is created (not when
 * app.module.ts is imported), so tests can build apps with different settings in-process.
 */
@Global()
@Module({
  providers: [{ provide: AppConfig, useFactory: () => loadConfig().config }],
  exports: [AppConfig],
})
export class ConfigModule {}
