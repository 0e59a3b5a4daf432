import { Module } from '@nestjs/common';
import { MetaRegistryModule } from '../meta-registry/meta-registry.module';
import { AdminTokenGuard } from './admin-token.guard';
import { AdminController } from './admin.controller';

@Module({
  imports: [MetaRegistryModule],
  controllers: [AdminController],
  providers: [AdminTokenGuard],
})
export class AdminModule {}
