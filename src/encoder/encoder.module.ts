import { Module } from '@nestjs/common';
import { MetaRegistryModule } from '../meta-registry/meta-registry.module';
import { EncoderHttpController } from './encoder-http.controller';

@Module({
  imports: [MetaRegistryModule],
  controllers: [EncoderHttpController],
})
export class EncoderModule {}
