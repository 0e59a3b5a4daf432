import { BOOT_ID } from '../common/boot-id';
import type { Owner } from './meta-store';

/**
 * This process as the owner of what it encodes, recorded with its metadata (owner
 * routing): its instance and boot id; a DP worker also its rank and pid; a DP supervisor
 * stages nothing and names no rank. Which of these a role names is decided where the
 * process is put together (meta-registry.module.ts).
 */
export class ProcessOwner {
  constructor(readonly self: Owner) {}

  /** A single process's owner (tests and tools wired without Nest use it too). */
  static single(instance: string, rank = 0): ProcessOwner {
    return new ProcessOwner({ instance, rank, boot: BOOT_ID });
  }

  /** Whether `owner` is this process (instance, boot and rank), not another or an earlier one. */
  isSelf(owner: Owner | undefined): boolean {
    const self = this.self;
    return (
      owner !== undefined &&
      owner.store === undefined &&
      owner.instance === self.instance &&
      owner.boot === self.boot &&
      owner.rank === self.rank
    );
  }

  /**
   * Whether `owner` is this instance's previous process (same EPD_INSTANCE_ID, another
   * boot): an embedding it staged died with it.
   */
  stagedByEarlierProcess(owner: Owner | undefined): boolean {
    return (
      owner?.instance === this.self.instance &&
      owner.boot !== undefined &&
      owner.boot !== this.self.boot
    );
  }
}
