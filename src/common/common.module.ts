import { Global, Module } from '@nestjs/common';
import { AdminSessions } from './auth/admin-sessions';
import { AdminTokenGuard } from './auth/admin-token.guard';
import { Clock } from './clock';
import { LifecycleEvents } from './lifecycle-events';
import { Deadlines } from './deadline';
import { Readiness, ReadinessInterceptor } from './readiness';
import { ShutdownPhases } from './shutdown-phases';

/**
 * Cross-cutting providers every feature may inject: the clock, the lifecycle events, call
 * deadlines, the admin guard, the process's readiness to serve, the ordered shutdown.
 */
const SHARED = [
  Clock,
  LifecycleEvents,
  Deadlines,
  AdminSessions,
  AdminTokenGuard,
  Readiness,
  ReadinessInterceptor,
  ShutdownPhases,
];

@Global()
@Module({ providers: SHARED, exports: SHARED })
export class CommonModule {}
