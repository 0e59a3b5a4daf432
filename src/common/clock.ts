import { Injectable } from '@nestjs/common';

/** Wall-clock access behind a class so that services test with a fake clock. */
@Injectable()
export class Clock {
  /** Epoch milliseconds: deadlines, TTLs, ages. */
  now(): number {
    return Date.now();
  }

  /** Monotonic milliseconds with sub-ms resolution: durations. */
  elapsed(): number {
    return performance.now();
  }
}
