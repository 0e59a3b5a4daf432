import { Global, Module } from '@nestjs/common';
import { AdminTokenGuard } from './auth/admin-token.guard';
import { Clock } from './clock';
import { Deadlines } from './deadline';

/** Cross-cutting providers every feature may inject: the clock, call deadlines, the admin guard. */
@Global()
@Module({
  providers: [Clock, Deadlines, AdminTokenGuard],
  exports: [Clock, Deadlines, AdminTokenGuard],
})
export class CommonModule {}
