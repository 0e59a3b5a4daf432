import { Module } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { MMExceptionFilter } from './mm-exception.filter';

@Module({ providers: [{ provide: APP_FILTER, useClass: MMExceptionFilter }] })
export class ErrorsModule {}
