import type { IpcChannel } from '../transport/ipc-channel';
import {
  CacheClaims,
  type ClaimCall,
  type ClaimRecord,
  type ClaimReply,
  type Claimed,
} from './claims';

/** An IPC call's bound: a claim never holds an encode longer than this. */
const IPC_TIMEOUT_MS = 2_000;

/**
 * A DP worker's claims, kept by its supervisor (EPD_REGISTRY_STORE=memory): one owner per
 * key across the instance's ranks. A supervisor that does not answer means "encode it
 * here, unrecorded", never a failed encode.
 */
export class ParentClaims extends CacheClaims {
  constructor(private readonly channel: IpcChannel) {
    super();
  }

  claim(key: string, record: ClaimRecord, unusable?: number): Promise<Claimed> {
    return this.call<Claimed>({ op: 'claim', key, record, unusable }).catch(() => ({
      mine: true,
      revision: 0,
    }));
  }

  update(key: string, record: ClaimRecord, revision: number): Promise<number | undefined> {
    return this.call<number | null>({ op: 'update', key, record, revision }).then(
      (r) => r ?? undefined,
      () => undefined,
    );
  }

  release(key: string, revision: number): Promise<void> {
    return this.call({ op: 'release', key, revision }).then(
      () => undefined,
      () => undefined,
    );
  }

  private async call<T extends ClaimReply>(call: ClaimCall): Promise<T> {
    return (await this.channel.request('claims', call, IPC_TIMEOUT_MS)) as T;
  }
}
