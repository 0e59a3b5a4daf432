import { Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { AdminTokenGuard } from '../common/auth/admin-token.guard';
import { AppConfig } from '../config/app-config';

/** /metrics behind EPD_ADMIN_TOKEN when EPD_METRICS_REQUIRE_TOKEN is true; open otherwise. */
@Injectable()
export class MetricsGuard implements CanActivate {
  constructor(
    private readonly config: AppConfig,
    private readonly admin: AdminTokenGuard,
  ) {}

  canActivate(context: ExecutionContext): boolean {
    return !this.config.admin.metricsRequireToken || this.admin.canActivate(context);
  }
}
