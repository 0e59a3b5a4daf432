import { Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { flushTracing } from './tracing';

/** Flushes batched spans once the app has drained (after every other shutdown hook). */
@Injectable()
export class TracingFlush implements OnApplicationShutdown {
  onApplicationShutdown(): Promise<void> {
    return flushTracing();
  }
}
