import { Logger } from '@nestjs/common';
import type { IpcChannel } from '../transport/ipc-channel';
import { MemoryMetaStore } from './memory-meta-store';
import type { StoredMeta } from './meta-store';

/** What a DP worker tells its supervisor about its records (EPD_REGISTRY_STORE=memory). */
export type MirrorMessage = { op: 'put'; record: StoredMeta } | { op: 'delete'; req_id: string };

const MIRROR_TIMEOUT_MS = 2000;

/**
 * A DP worker's registry on the memory store: its records live here (the worker answers
 * for them) and each put and delete is mirrored to its supervisor, whose registry then
 * answers `wait_metadata` for every rank at once, with no hop to a worker. A put resolves
 * once the supervisor has it, so a receiver told "encoded" finds the metadata there.
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
    await this.mirror({ op: 'put', record });
  }

  override async delete(reqId: string): Promise<boolean> {
    const removed = await super.delete(reqId);
    if (removed) await this.mirror({ op: 'delete', req_id: reqId });
    return removed;
  }

  /** Best effort: the worker's own answer never depends on its supervisor being reachable. */
  private async mirror(message: MirrorMessage): Promise<void> {
    try {
      await this.channel.request('meta', message, MIRROR_TIMEOUT_MS);
    } catch (err) {
      const reqId = message.op === 'put' ? message.record.reqId : message.req_id;
      this.logger.warn(
        { req_id: reqId, err: (err as Error).message },
        'metadata not mirrored to the DP supervisor',
      );
    }
  }
}
