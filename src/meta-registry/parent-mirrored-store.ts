import { Logger } from '@nestjs/common';
import type { IpcChannel } from '../transport/ipc-channel';
import { MemoryMetaStore } from './memory-meta-store';
import type { StoredMeta } from './meta-store';
import type { IpcTopic } from '../transport/ipc-topics';

/** What a DP worker tells its supervisor about its records (EPD_REGISTRY_STORE=memory). */
export type MirrorMessage = { op: 'put'; record: StoredMeta } | { op: 'delete'; req_id: string };

/**
 * A DP worker's registry on the memory store: its records live here (the worker answers
 * for them) and each put and delete is mirrored to its supervisor, whose registry then
 * answers `wait_metadata` for every rank at once, with no hop to a worker. Mirroring is a
 * notification, not a request: the IPC channel keeps order, the message is written before
 * the worker answers anything that depends on it, so the supervisor reads it first; and
 * waiting for an ack cost the encode two round trips to a busy supervisor.
 */
export class ParentMirroredStore extends MemoryMetaStore {
  private readonly logger = new Logger('ParentMirroredStore');

  constructor(
    maxEntries: number,
    private readonly channel: IpcChannel,
  ) {
    super(maxEntries);
  }

  override async put(record: StoredMeta): Promise<void> {
    await super.put(record);
    this.mirror({ op: 'put', record });
  }

  override async delete(reqId: string): Promise<boolean> {
    const removed = await super.delete(reqId);
    if (removed) this.mirror({ op: 'delete', req_id: reqId });
    return removed;
  }

  /** Expired here expires there too: the supervisor's index of what this worker holds shrinks. */
  override async expire(cutoff: number): Promise<string[]> {
    const expired = await super.expire(cutoff);
    for (const reqId of expired) this.mirror({ op: 'delete', req_id: reqId });
    return expired;
  }

  /** Best effort: the worker's own answer never depends on its supervisor being reachable. */
  private mirror(message: MirrorMessage): void {
    if (this.channel.notify('meta', message)) return;
    const reqId = message.op === 'put' ? message.record.reqId : message.req_id;
    this.logger.warn({ req_id: reqId }, 'metadata not mirrored: the DP supervisor is gone');
  }
}

declare module '../transport/ipc-topics' {
  interface IpcTopics {
    /** Worker → supervisor: a record put or deleted, for the supervisor's registry. */
    meta: IpcTopic<MirrorMessage, void>;
  }
}
