import { Global, Module, type DynamicModule } from '@nestjs/common';
import { AppConfig } from './app-config';
import { ProcessRole } from './process-role';

/**
 * Hand-written rather than @nestjs/config: we need YAML layering, one zod schema and a
 * single typed object. The config is loaded once, by whoever creates the app (main.ts,
 * or a test with its own settings), and handed in here; nothing reads it a second time.
 */
@Global()
@Module({})
export class ConfigModule {
  static withConfig(config: AppConfig, role: ProcessRole): DynamicModule {
    return {
      module: ConfigModule,
      providers: [
        { provide: AppConfig, useValue: config },
        { provide: ProcessRole, useValue: role },
      ],
      exports: [AppConfig, ProcessRole],
    };
  }
}
