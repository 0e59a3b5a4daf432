import { Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import { IpcChannel } from './ipc-channel';
import type { IpcTopicName, IpcTopics } from './ipc-topics';

/**
 * A DP worker's IPC channel to the supervisor that started it (absent in any other
 * process). Features register what the supervisor may ask (`handle`); the worker says
 * when it is ready to take calls. When the supervisor goes away, even by SIGKILL, the
 * channel disconnects and the worker shuts down gracefully instead of running orphaned.
 */
@Injectable()
export class ParentLink implements OnModuleDestroy {
  private readonly logger = new Logger('ParentLink');
  readonly channel?: IpcChannel;
  private readonly onDisconnect = () => {
    this.logger.warn('DP supervisor is gone; shutting down');
    process.kill(process.pid, 'SIGTERM');
  };

  /** `parent`: this process when a DP supervisor started it (a worker), else none. */
  constructor(parent: NodeJS.Process | undefined) {
    if (!parent?.send) return;
    this.channel = new IpcChannel(parent);
    process.once('disconnect', this.onDisconnect);
    // A supervisor that died while this worker was still loading disconnected before
    // anyone listened: the event is gone, but the channel says so (dp-worker-orphaned-at-
    // boot: such a worker finished starting and ran on, parentless).
    if (!process.connected) {
      process.off('disconnect', this.onDisconnect);
      this.onDisconnect();
    }
  }

  handle<K extends IpcTopicName>(
    type: K,
    handler: (
      payload: IpcTopics[K]['request'],
    ) => IpcTopics[K]['reply'] | Promise<IpcTopics[K]['reply']>,
  ): void {
    this.channel?.handle(type, handler);
  }

  /** Calls from the supervisor are served from now on. */
  ready(): void {
    this.channel?.notify('ready', { pid: process.pid });
  }

  /** What this worker still waits for (or which condition failed), while it is not ready. */
  waiting(waitingFor: Record<string, string>, failed: string | null): void {
    this.channel?.notify('waiting', { pid: process.pid, waiting_for: waitingFor, failed });
  }

  onModuleDestroy(): void {
    process.off('disconnect', this.onDisconnect);
    this.channel?.close('worker shutting down');
  }
}
