import { Module } from '@nestjs/common';
import { ProfileControl } from './profile-control';
import { ProfilerService } from './profiler.service';
import { ProfilingController } from './profiling.controller';

/** V8 CPU profiles of this process, started and stopped over HTTP or NATS. */
@Module({
  controllers: [ProfilingController],
  providers: [ProfilerService, { provide: ProfileControl, useExisting: ProfilerService }],
  exports: [ProfilerService],
})
export class ProfilingModule {}
