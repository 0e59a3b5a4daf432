import { Global, Module } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { ProcessRole } from '../config/process-role';
import { Readiness } from '../common/readiness';
import { Clock } from '../common/clock';
import { EpdNatsServer } from './epd-nats.server';
import { NatsConnectionService } from './nats-connection.service';
import { NatsForwarder } from './nats-forwarder';
import { IpcRpcServer } from './ipc-rpc.server';
import { ParentLink } from './parent-link';
import { InstanceSubjects, WorkerSubjects } from './served-subjects';

/**
 * The process's one NATS connection, the Nest server on it, the client that forwards
 * calls to peer instances (owner routing), and a DP worker's IPC link to its supervisor
 * with the Nest transport on it. Infrastructure only: it
 * imports no feature module; each feature's @MessagePattern handlers live in its own
 * controllers, beside its HTTP routes.
 */
@Global()
@Module({
  providers: [
    NatsConnectionService,
    NatsForwarder,
    {
      // Only a DP worker was started by a supervisor it talks to.
      provide: ParentLink,
      inject: [ProcessRole],
      useFactory: (role: ProcessRole) => new ParentLink(role.worker ? process : undefined),
    },
    {
      provide: EpdNatsServer,
      inject: [NatsConnectionService, AppConfig, ProcessRole, Readiness, Clock],
      useFactory: (
        nats: NatsConnectionService,
        config: AppConfig,
        role: ProcessRole,
        readiness: Readiness,
        clock: Clock,
      ) => {
        const { subjectPrefix: prefix } = config.nats;
        const id = config.instance.id;
        const subjects = role.worker
          ? new WorkerSubjects(prefix, id, role.rank)
          : new InstanceSubjects(prefix, id, role.single ? role.rank : undefined);
        return new EpdNatsServer(nats, config, subjects, readiness, clock);
      },
    },
    {
      provide: IpcRpcServer,
      inject: [ParentLink, AppConfig, Readiness],
      useFactory: (link: ParentLink, config: AppConfig, readiness: Readiness) =>
        new IpcRpcServer(link, config, readiness),
    },
  ],
  exports: [NatsConnectionService, EpdNatsServer, NatsForwarder, ParentLink, IpcRpcServer],
})
export class TransportModule {}
