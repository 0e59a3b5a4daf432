import { Module } from '@nestjs/common';
import { ProfilerService } from './profiler.service';
import { ProfilingController } from './profiling.controller';

/** V8 CPU profiles of this worker, started and stopped over HTTP or NATS. */
@Module({
  controllers: [ProfilingController],
  providers: [ProfilerService],
  exports: [ProfilerService],
})
export class ProfilingModule {}
