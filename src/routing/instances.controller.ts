import { Controller, Get, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { AdminTokenGuard } from '../common/auth/admin-token.guard';
import { AppConfig } from '../config/app-config';
import { InstanceRoster, type InstanceView } from './instance-roster.service';
import { OwnerRouter } from './owner-router.service';

/** GET /admin/instances: the instances sharing the metadata store, and this one's routing. */
@ApiTags('admin')
@ApiBearerAuth()
@UseGuards(AdminTokenGuard)
@Controller('admin')
export class InstancesController {
  constructor(
    private readonly config: AppConfig,
    private readonly roster: InstanceRoster,
    private readonly router: OwnerRouter,
  ) {}

  @Get('instances')
  instances(): {
    self: string;
    store: string;
    /** This instance's heartbeats are being stored: a missing one can mean "gone". */
    roster_healthy: boolean;
    instances: InstanceView[];
    routing: OwnerRouter['stats'];
  } {
    return {
      self: this.config.instance.id,
      store: this.config.registry.store,
      roster_healthy: this.roster.enabled && this.roster.trustworthy,
      instances: this.roster.list(),
      routing: this.router.stats,
    };
  }
}
