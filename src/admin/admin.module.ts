import { Module } from '@nestjs/common';
import { EncoderModule } from '../encoder/encoder.module';
import { MetaRegistryModule } from '../meta-registry/meta-registry.module';
import { AdminTokenGuard } from '../common/auth/admin-token.guard';
import { AdminController } from './admin.controller';
import { RequestsAdminController } from './requests-admin.controller';

@Module({
  imports: [MetaRegistryModule, EncoderModule],
  controllers: [AdminController, RequestsAdminController],
  providers: [AdminTokenGuard],
})
export class AdminModule {}
