import { Module } from '@nestjs/common';
import { SglangBootstrap } from './sglang-bootstrap.service';

/** Integration with an SGLang deployment: registration with its encoder bootstrap server. */
@Module({ providers: [SglangBootstrap], exports: [SglangBootstrap] })
export class SglangModule {}
