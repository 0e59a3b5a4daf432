import { Injectable } from '@nestjs/common';

/** Wall-clock access behind a class so that services test with a fake clock. */
@Injectable()
export class Clock {
  now(): number {
    return Date.now();
  }
}
